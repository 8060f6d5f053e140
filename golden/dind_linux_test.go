package golden

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/image/dindtest"
)

// TestBuildDind is the seeds' workflow for real, through the library as
// root: the Debian docker.io image of package dindtest (shaped like
// docker:dind: entrypoint dockerd-entrypoint.sh, no extra env) recorded in
// the image cache under the local name docker:dind, and Build with the
// default daemon image, DaemonPull never (the name resolves with no
// network) and no daemon flags; the hello docker-archive loaded and an
// image derived from it pulled on the host from go-containerregistry's
// registry on loopback. The summary lists both with IDs (and the pull's
// manifest digest), the volume is e2fsck-clean, and the host's own dockerd,
// on a loop mount of a copy of the golden volume, lists and runs both
// images without loading anything.
func TestBuildDind(t *testing.T) {
	need(t)
	needNamespaces(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the dind image is built by debootstrap, and the host dockerd check mounts the volume")
	}
	for _, tool := range []string{"e2fsck", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing", tool)
		}
	}
	layoutDir := dindtest.Layout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cacheDir, err := image.DefaultCacheDir() // need's GVX_CACHE_DIR
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.Add(ctx, c, "oci:"+layoutDir, image.Options{Tags: []string{"docker:dind"}}); err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	hello := filepath.Join(work, "hello.tar")
	if err := dindtest.WriteHello(hello); err != nil {
		t.Fatal(err)
	}
	// The pulled image: hello plus a layer with /pulled.
	base, err := tarball.ImageFromPath(hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	pulledImg, err := mutate.AppendLayers(base, fileLayer(t, "pulled", "pulled from the registry\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := testRegistry(t)
	ref := reg + "/gvx/hello-pulled:v1"
	push(t, ref, pulledImg)
	pulledID, _ := pulledImg.ConfigName()
	pulledDigest, _ := pulledImg.Digest()
	helloID, _ := base.ConfigName()

	outDir := filepath.Join(work, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outDir, "golden.ext4")
	var logb bytes.Buffer
	start := time.Now()
	sum, err := Build(ctx, Options{Out: out, Rungv: rungvBin, DaemonPull: image.PullNever,
		Loads: []string{hello}, Pulls: []string{ref}, ReadyTimeout: 60 * time.Second, Size: 2 << 30, Log: &logb})
	if err != nil {
		t.Fatalf("Build: %v\nlog:\n%s", err, logb.String())
	}
	t.Logf("Build: %.1fs\n%s", time.Since(start).Seconds(), logb.String())
	if !strings.Contains(logb.String(), "(docker:dind: dockerd-entrypoint.sh)") {
		t.Errorf("the daemon was not started by the image's entrypoint:\n%s", logb.String())
	}
	got := map[string]Image{}
	for _, im := range sum.Images {
		got[im.Ref] = im
	}
	if im := got[dindtest.HelloTag]; im.ID != helloID.String() || im.Digest != "" {
		t.Errorf("hello in the summary: %+v, want ID %s", im, helloID)
	}
	if im := got[ref]; im.ID != pulledID.String() || im.Digest != pulledDigest.String() {
		t.Errorf("pulled image in the summary: %+v, want ID %s digest %s", im, pulledID, pulledDigest)
	}
	if len(sum.Images) != 2 || sum.UsedBytes <= 0 || sum.AllocatedBytes <= 0 || sum.AllocatedBytes > sum.UsedBytes+1<<20 || sum.DaemonImage != DefaultDaemonImage {
		t.Errorf("summary %+v", sum)
	}
	if names := dirNames(t, outDir); strings.Join(names, " ") != "golden.ext4" {
		t.Errorf("left next to Out: %v", names)
	}
	if out, err := exec.Command("e2fsck", "-fn", out).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn: %v\n%s", err, out)
	}

	hostDockerd(t, work, out, []string{dindtest.HelloTag, ref}, map[string]string{
		dindtest.HelloTag: "echo hi",
		ref:               "cat /pulled",
	}, map[string]string{dindtest.HelloTag: "hi\n", ref: "pulled from the registry\n"})
}

// fileLayer is a layer holding one file.
func fileLayer(t *testing.T, name, body string) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// hostDockerd runs the host's dockerd (and the containerd it starts
// itself) on a loop mount of a copy of the golden volume, in its own
// exec-root, pidfile and socket under work, and checks that it lists the
// images and runs each one's command. Everything is torn down in
// t.Cleanup: dockerd and its children, mounts, the loop device.
func hostDockerd(t *testing.T, work, golden string, images []string, run, want map[string]string) {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("no dockerd on the host: cannot check the golden volume with a real host daemon")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI on the host")
	}
	hd := filepath.Join(work, "hostd")
	dataRoot, execRoot := filepath.Join(hd, "data"), filepath.Join(hd, "exec")
	for _, d := range []string{dataRoot, execRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cp := filepath.Join(hd, "copy.ext4")
	if out, err := exec.Command("cp", "--sparse=always", golden, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	loopOut, err := exec.Command("losetup", "--find", "--show", cp).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device here: %v %s", err, loopOut)
	}
	loop := strings.TrimSpace(string(loopOut))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", loop, err, out)
		}
	})
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "nosuid,nodev", loop, dataRoot).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v %s", loop, err, out)
	}
	t.Cleanup(func() { unmountAll(t, dataRoot) })

	if _, err := os.Stat("/run/containerd/containerd.sock"); err == nil {
		// dockerd then uses it instead of starting its own (its rule).
		t.Logf("a system containerd is running: the host dockerd uses it")
	}
	sock := filepath.Join(hd, "docker.sock")
	var log bytes.Buffer
	d := exec.Command(dockerd, "--data-root", dataRoot, "--exec-root", execRoot, "--pidfile", filepath.Join(hd, "dockerd.pid"),
		"-H", "unix://"+sock, "--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=overlay2")
	d.Stdout, d.Stderr = &log, &log
	d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("dockerd did not stop on SIGTERM in 30s")
		}
		syscall.Kill(-d.Process.Pid, syscall.SIGKILL)
		<-exited
		killMentioning(t, hd) // containerd and shims left behind, if any
		unmountAll(t, execRoot)
	})
	cli := func(args ...string) (string, error) {
		c := exec.Command(docker, append([]string{"-H", "unix://" + sock}, args...)...)
		c.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(hd, "cli"))
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := cli("version"); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("host dockerd exited:\n%s", tail(log.String()))
		default:
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("host dockerd did not answer in 60s:\n%s", tail(log.String()))
		}
	}
	ls, err := cli("images", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		t.Fatalf("docker images: %v %s", err, ls)
	}
	t.Logf("host dockerd on the golden volume lists:\n%s", ls)
	for _, im := range images {
		if !strings.Contains("\n"+ls, "\n"+im+"\n") {
			t.Errorf("host dockerd does not list %s:\n%s", im, ls)
		}
	}
	for _, im := range images {
		out, err := cli(append([]string{"run", "--rm", "--network=none", im}, strings.Fields(run[im])...)...)
		if err != nil || out != want[im] {
			t.Errorf("docker run %s %s: %v %q, want %q\ndaemon:\n%s", im, run[im], err, out, want[im], tail(log.String()))
		}
	}
}

// unmountAll unmounts dir and everything below it.
func unmountAll(t *testing.T, dir string) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var below []string
	for _, l := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			below = append(below, f[4])
		}
	}
	for i := len(below) - 1; i >= 0; i-- { // the innermost (mounted last) first
		if out, err := exec.Command("umount", below[i]).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", below[i], err, out)
			exec.Command("umount", "-l", below[i]).Run()
		}
	}
}

// killMentioning kills the processes whose command line mentions dir:
// this test's host containerd and its shims, if dockerd left them.
func killMentioning(t *testing.T, dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cl, []byte(dir)) {
			t.Logf("killing %d left by the host dockerd: %s", pid, bytes.ReplaceAll(cl, []byte{0}, []byte{' '}))
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
