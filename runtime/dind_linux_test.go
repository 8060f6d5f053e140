package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/image/imagetest"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/runtime"
	"z.gfire.dev/gvx/runtime/volume"
)

// Docker inside the sandbox. rungv run cannot start a privileged episode
// yet (docs/dind.md lists what the runtime must wire), so these tests drive
// the rungv binary as runsc, with a bundle made like the runtime makes
// one plus runtime.ApplyDind and runtime.DindRunscFlags: that is exactly
// the part the runtime has to add.

func TestApplyDind(t *testing.T) {
	s := &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin"}}}
	runtime.ApplyDind(s)
	if c := s.Process.Capabilities; c == nil || len(c.Bounding) != len(runtime.DindCapabilities) || len(c.Effective) != len(c.Bounding) {
		t.Fatalf("capabilities: %+v", c)
	}
	if got := s.Process.Env[len(s.Process.Env)-1]; got != runtime.DindExtraFlagsEnv+"=--iptables=false --ip6tables=false" {
		t.Fatalf("env: %q", got)
	}
	if n := len(s.Mounts); n != 1 || s.Mounts[0].Type != "cgroup" || s.Mounts[0].Destination != runtime.DindCgroupPath {
		t.Fatalf("mounts: %+v", s.Mounts)
	}
	// The hints of volumes go (they forbid mmap or hide writes in a
	// memory overlay), other hints and annotations stay.
	s.Annotations = map[string]string{"keep": "1", "dev.gvisor.spec.mount.other.source": "/dir", "dev.gvisor.spec.mount.other.share": "shared"}
	for k, v := range volume.Annotations(3, volume.Spec{Source: "/v.ext4", Target: "/var/lib/docker"}, "/v.ext4") {
		s.Annotations[k] = v
	}
	runtime.ApplyDind(s)
	want := map[string]string{
		"keep": "1", "dev.gvisor.spec.mount.other.source": "/dir", "dev.gvisor.spec.mount.other.share": "shared",
		volume.AnnotationPrefix + "3": s.Annotations[volume.AnnotationPrefix+"3"],
	}
	if len(s.Annotations) != len(want) || s.Annotations[volume.AnnotationPrefix+"3"] == "" {
		t.Fatalf("annotations after ApplyDind: %v, want %v", s.Annotations, want)
	}
	for k, v := range want {
		if s.Annotations[k] != v {
			t.Fatalf("annotations after ApplyDind: %v, want %v", s.Annotations, want)
		}
	}
	// Idempotent, and a caller's own choices stay.
	s.Process.Env = []string{runtime.DindExtraFlagsEnv + "=--debug"}
	runtime.ApplyDind(s)
	if len(s.Mounts) != 1 || len(s.Process.Env) != 1 {
		t.Fatalf("second ApplyDind: mounts %+v env %q", s.Mounts, s.Process.Env)
	}
}

// dindEnv is what a dind test needs.
type dindEnv struct {
	rungv  string // the rungv binary
	rootfs string // the dind image as a runtime-profile EROFS (cached)
	config v1.Config
	hello  string // docker-archive of the hello image
	dir    string // the test's scratch directory
}

func needDind(t *testing.T) *dindEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root): dockerd in the sandbox needs every capability, which rootless runsc cannot grant")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("the docker CLI is missing (apt-get install docker.io)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	layoutDir, err := dindtest.Build(ctx, "")
	if dindtest.IsUnavailable(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &dindEnv{dir: dir, rungv: filepath.Join(dir, "rungv"), hello: filepath.Join(dir, "hello.tar")}
	if err := dindtest.WriteHello(e.hello); errors.Is(err, imagetest.ErrNoBusybox) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", e.rungv, "../cmd/rungv")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rungv: %v\n%s", err, out)
	}
	if e.rootfs, e.config, err = flattenLayout(layoutDir, dir); err != nil {
		t.Fatal(err)
	}
	return e
}

// flattenLayout makes the runtime-profile EROFS rootfs of the layout's
// image, as the runtime does for rungv run, cached next to the layout by
// manifest digest.
func flattenLayout(layoutDir, tmp string) (out string, _ v1.Config, _ error) {
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		return "", v1.Config{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		return "", v1.Config{}, fmt.Errorf("dind layout index: %v", err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return "", v1.Config{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", v1.Config{}, err
	}
	out = layoutDir + ".erofs." + im.Manifests[0].Digest.Hex[:16]
	if _, err := os.Stat(out); err == nil {
		return out, cf.Config, nil // published by rename: complete
	}
	layers, err := img.Layers()
	if err != nil {
		return "", v1.Config{}, err
	}
	var rs []io.Reader
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return "", v1.Config{}, err
		}
		defer rc.Close()
		rs = append(rs, rc)
	}
	b := erofs.NewBuilder(erofs.Options{Profile: erofs.ProfileRuntime, Path: out, TempDir: tmp})
	defer b.Close()
	if err := overlay.Flatten(b, rs...); err != nil {
		return "", v1.Config{}, err
	}
	return out, cf.Config, b.Finish()
}

// dockerd is one sandboxed Docker daemon, reachable at sock from the host.
type dockerd struct {
	t     *testing.T
	cmd   *exec.Cmd
	state string
	sock  string
	rungv string
	id    string
	log   *os.File
	done  chan struct{}
}

// startDockerd starts dockerd in a sandbox with /var/lib/docker on the
// ext4lite volume file volumeFile, or on a tmpfs if it is "".
func startDockerd(t *testing.T, e *dindEnv, volumeFile string) *dockerd {
	t.Helper()
	d, err := tryStartDockerd(t, e, volumeFile)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tryStartDockerd(t *testing.T, e *dindEnv, volumeFile string) (*dockerd, error) {
	t.Helper()
	state, err := os.MkdirTemp("", "dind-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	bundle := filepath.Join(state, "bundle")
	hostDir := filepath.Join(state, "s")
	for _, d := range []string{filepath.Join(bundle, "rootfs"), hostDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const guestDir = "/run/gvx-host"
	args := append(append([]string{}, e.config.Entrypoint...), "--tls=false", "-H", "unix://"+guestDir+"/docker.sock")
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args:    args,
			Env:     append(append([]string{}, e.config.Env...), "HOME=/root", "DOCKER_TLS_CERTDIR="),
			Cwd:     "/",
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1048576}},
		},
		Root:     &specs.Root{Path: filepath.Join(bundle, "rootfs")},
		Hostname: "dind",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=67108864"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: guestDir, Type: "bind", Source: hostDir, Options: []string{"rw", "rbind"}},
		},
		Annotations: map[string]string{
			"dev.gvisor.spec.rootfs.source":  e.rootfs,
			"dev.gvisor.spec.rootfs.type":    "erofs",
			"dev.gvisor.spec.rootfs.overlay": "memory",
		},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: "/proc/self/ns/net"},
		}},
	}
	if volumeFile == "" {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/var/lib/docker", Type: "tmpfs", Source: "tmpfs", Options: []string{"rw", "nosuid", "nodev"}})
	} else {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/var/lib/docker", Type: "bind", Source: volumeFile, Options: []string{"rw", "rbind"}})
		for k, v := range volume.Annotations(0, volume.Spec{Source: volumeFile, Target: "/var/lib/docker"}, volumeFile) {
			s.Annotations[k] = v
		}
	}
	runtime.ApplyDind(s)
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(state, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	// Private network and mount namespaces, as rungv's supervisor makes:
	// runsc's mounts (its null netns) go with the episode.
	argv := append([]string{"--net", "--mount", "--propagation=private", e.rungv, "--root=" + filepath.Join(state, "runsc"), "--ignore-cgroups", "--network=none"}, runtime.DindRunscFlags()...)
	if dbg := os.Getenv("RUNGV_DEBUG_LOG"); dbg != "" {
		argv = append(argv, "--debug", "--debug-log="+filepath.Clean(dbg)+"/")
	}
	id := "dind-" + filepath.Base(state)
	argv = append(argv, "run", "--bundle="+bundle, id)
	cmd := exec.Command("unshare", argv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &dockerd{t: t, cmd: cmd, state: state, rungv: e.rungv, id: id, sock: filepath.Join(hostDir, "docker.sock"), log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.kill() })
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := d.docker("version", "--format", "{{.Server.Version}}"); err == nil {
			return d, nil
		}
		select {
		case <-d.done:
			return nil, &startError{fmt.Sprintf("the sandboxed dockerd exited: %v\n%s", cmd.ProcessState, d.logTail()), mustRead(t, logf.Name())}
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, &startError{fmt.Sprintf("dockerd did not answer on %s in 90 s:\n%s", d.sock, d.logTail()), mustRead(t, logf.Name())}
		}
	}
}

// startError is a daemon that did not come up, with its whole log.
type startError struct{ msg, log string }

func (e *startError) Error() string { return e.msg }

func (d *dockerd) logTail() string {
	b, _ := os.ReadFile(d.log.Name())
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if !strings.Contains(l, "level=info") && !strings.Contains(l, "level=debug") {
			keep = append(keep, l)
		}
	}
	if len(keep) > 25 {
		keep = keep[len(keep)-25:]
	}
	return strings.Join(keep, "\n")
}

// docker runs the host's docker CLI against the sandboxed daemon.
func (d *dockerd) docker(args ...string) (string, error) {
	c := exec.Command("docker", args...)
	c.Env = append(os.Environ(), "DOCKER_HOST=unix://"+d.sock, "DOCKER_BUILDKIT=0")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}

func (d *dockerd) must(args ...string) string {
	d.t.Helper()
	out, err := d.docker(args...)
	if err != nil {
		d.t.Fatalf("docker %s: %v\n%s\ndaemon:\n%s", strings.Join(args, " "), err, out, d.logTail())
	}
	return out
}

// stop sends SIGTERM to dockerd with runsc kill (runsc run forwards no
// signals; rungv run does the same) and waits for the sandbox to exit by
// itself.
func (d *dockerd) stop() {
	d.t.Helper()
	if out, err := exec.Command(d.rungv, "--root="+filepath.Join(d.state, "runsc"), "kill", d.id, "TERM").CombinedOutput(); err != nil {
		d.t.Fatalf("runsc kill %s TERM: %v %s", d.id, err, out)
	}
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("rungv did not exit within 60 s of SIGTERM:\n%s", d.logTail())
	}
	if !strings.Contains(mustRead(d.t, d.log.Name()), "Daemon shutdown complete") {
		l := mustRead(d.t, d.log.Name())
		if len(l) > 3000 {
			l = l[len(l)-3000:]
		}
		d.t.Errorf("dockerd did not shut down cleanly (exit %v):\n%s", d.cmd.ProcessState, l)
	}
	d.checkGone()
}

// checkGone asserts that no process or host mount of the episode remains.
func (d *dockerd) checkGone() {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mi, []byte(d.state)) {
			left = append(left, "a host mount under "+d.state)
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err == nil && bytes.Contains(cl, []byte(d.state)) && !bytes.Contains(st, []byte(") Z ")) {
				left = append(left, "process "+e.Name())
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("left behind: %s", strings.Join(left, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *dockerd) kill() {
	select {
	case <-d.done:
	default:
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

func mustRead(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exercise loads the hello image, runs it and builds on it.
func exercise(t *testing.T, e *dindEnv, d *dockerd) {
	if out := d.must("info", "--format", "{{.Driver}} {{.CgroupVersion}}"); !strings.HasPrefix(out, "overlay2 ") {
		t.Errorf("docker info: storage driver %q, want overlay2", out)
	}
	if out := d.must("load", "-i", e.hello); !strings.Contains(out, dindtest.HelloTag) {
		t.Fatalf("docker load: %s", out)
	}
	if out := d.must("run", "--rm", "hello", "echo", "hi"); out != "hi\n" {
		t.Fatalf("docker run: %q", out)
	}
	ctxDir := t.TempDir()
	df := "FROM hello\nRUN echo built > /built\nRUN cat /built && rm /bin/true\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	d.must("build", "-t", "hello2", ctxDir)
	if out := d.must("run", "--rm", "hello2", "sh", "-c", "cat /built; ls /bin/true 2>&1 || echo gone"); !strings.HasPrefix(out, "built\n") || !strings.HasSuffix(out, "gone\n") {
		t.Fatalf("built image: %q", out)
	}
}

// TestDindTmpfs runs dockerd with /var/lib/docker on a tmpfs.
func TestDindTmpfs(t *testing.T) {
	e := needDind(t)
	d := startDockerd(t, e, "")
	exercise(t, e, d)
	d.stop()
}

// TestDindVolume keeps /var/lib/docker on an ext4lite volume: the images
// survive a graceful stop, e2fsck finds the volume clean, and a sparse
// clone of it starts a daemon that has them.
func TestDindVolume(t *testing.T) {
	e := needDind(t)
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck is missing (apt-get install e2fsprogs)")
	}
	vol := filepath.Join(e.dir, t.Name()+".ext4")
	v, err := ext4lite.Create(vol, 4<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(vol) })
	d := startDockerd(t, e, vol)
	exercise(t, e, d)
	d.stop()
	if out, err := exec.Command("e2fsck", "-fn", vol).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn after a graceful stop: %v\n%s", err, out)
	}
	clone := vol + ".clone"
	if out, err := exec.Command("cp", "--sparse=always", vol, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	t.Cleanup(func() { os.Remove(clone) })
	d2 := startDockerd(t, e, clone)
	if out := d2.must("images", "--format", "{{.Repository}}"); !strings.Contains(out, "hello2") || !strings.Contains(out, "hello\n") {
		t.Fatalf("images on the clone: %q", out)
	}
	if out := d2.must("run", "--rm", "hello2", "cat", "/built"); out != "built\n" {
		t.Fatalf("run on the clone: %q", out)
	}
	d2.stop()
	if out, err := exec.Command("e2fsck", "-fn", clone).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn of the clone: %v\n%s", err, out)
	}
}
