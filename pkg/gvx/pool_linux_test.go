package gvx_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/reflink/reflinktest"
	"z.gfire.dev/gvx/sink"
)

// poolDirs returns a directory for the golden volume and the scratch
// clones: a loop-mounted XFS (reflink=1) as root, so clones are real
// reflinks; otherwise a temporary directory with CloneMode Auto (sparse
// copies), since loop mounts need root.
func poolDirs(t *testing.T) (dir string, mode reflink.Mode) {
	t.Helper()
	if os.Geteuid() == 0 {
		return reflinktest.Mount(t, "xfs"), reflink.Always
	}
	t.Log("not root: no loop XFS, the pool copies the golden volume (CloneMode Auto)")
	return t.TempDir(), reflink.Auto
}

// makeGolden writes a small golden volume holding golden.txt.
func makeGolden(t *testing.T, path string) []byte {
	t.Helper()
	makeVolume(t, path, "golden.txt", "from the golden volume\n")
	return fileSum(t, path)
}

// makeVolume makes a 128 MiB ext4 volume at path holding one file.
func makeVolume(t *testing.T, path, name, body string) {
	t.Helper()
	v, err := ext4lite.Create(path, 128<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileSum(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

// residue snapshots what an episode could leave behind: mounts on the
// host and the private TMPDIR where rungv keeps its state.
type residue struct {
	mounts map[string]bool
	tmp    string
	paths  []string // a new mount naming any of these is the pool's
}

func mountLines(t *testing.T) map[string]bool {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(mi), "\n") {
		m[l] = true
	}
	return m
}

func takeResidue(t *testing.T, paths ...string) residue {
	t.Helper()
	tmp := os.Getenv("TMPDIR")
	return residue{mounts: mountLines(t), tmp: tmp, paths: append(paths, tmp, "rungv")}
}

func (r residue) check(t *testing.T) {
	t.Helper()
	waitNoSandbox(t)
	// Other tests on this machine mount things too: only new mounts that
	// name the pool's directories count.
	for l := range mountLines(t) {
		if r.mounts[l] {
			continue
		}
		for _, p := range r.paths {
			if strings.Contains(l, p) {
				t.Errorf("mount left behind: %s", l)
			}
		}
	}
	if ents, _ := os.ReadDir(r.tmp); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR: %v", names)
	}
}

// poolEnv gives rungv a private TMPDIR (to see its state go) and EROFS
// cache (the caller's, kept).
func poolEnv(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("GVX_CACHE_DIR", t.TempDir())
}

// TestPoolIsolation is issue 7's proof, with the busybox image and shell
// commands as the workload (standing in for docker:dind): 4 episodes run
// at the same time from one golden volume; each reads the golden file,
// writes its own file and 1 MiB into its clone, and — once all four are
// running — lists its volume and must see only its own file. Afterwards
// the golden volume is bit-identical, and no process, mount, clone or
// state directory is left.
func TestPoolIsolation(t *testing.T) {
	need(t)
	poolEnv(t)
	dir, mode := poolDirs(t)
	golden := filepath.Join(dir, "golden.ext4")
	sum := makeGolden(t, golden)
	ctl := t.TempDir() // the host tells the guests to go on by creating ctl/go
	scratch := filepath.Join(dir, "episodes")
	before := takeResidue(t, scratch, ctl)

	const n = 4
	script := `cat /var/lib/docker/golden.txt
echo "$GVX_EPISODE" > /var/lib/docker/mine-$GVX_EPISODE
dd if=/dev/zero of=/var/lib/docker/blob bs=64k count=16 2>/dev/null
sync
echo written
until [ -e /ctl/go ]; do sleep 0.05; done
ls /var/lib/docker | tr '\n' ' '; echo`
	pool, err := gvx.NewPool(gvx.PoolConfig{
		Golden:     golden,
		ScratchDir: scratch,
		Parallel:   n,
		Timeout:    time.Minute,
		CloneMode:  mode,
		Base: gvx.Config{
			Rungv:         rungvBin,
			OCIImage:      imageRef,
			Entrypoint:    []string{"sh", "-c"},
			EntrypointSet: true,
			Cmd:           []string{script},
			Mounts:        []gvx.Mount{{Kind: gvx.MountBind, ImagePath: ctl, GuestPath: "/ctl", ReadOnly: true}},
		},
		Ready: func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "written\n") },
	})
	if err != nil {
		t.Fatal(err)
	}
	// A barrier that gives up with the episode's context: an episode that
	// fails before it gets here must not hang the others.
	var ready sync.WaitGroup
	ready.Add(n)
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	var once sync.Once
	outs := make([]string, n)
	ms, err := pool.Run(context.Background(), n, func(ctx context.Context, ep *gvx.Episode) error {
		if _, err := os.Stat(ep.Volume); err != nil {
			return err
		}
		// All n episodes are running (and written) before any goes on.
		ready.Done()
		select {
		case <-allReady:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the other episodes: %w", ctx.Err())
		}
		var err error
		once.Do(func() { err = os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644) })
		if err != nil {
			return err
		}
		code, err := ep.Wait(ctx)
		outs[ep.ID] = string(ep.Stdout())
		if err != nil || code != 0 {
			return fmt.Errorf("exit %d, %v; stderr %q", code, err, ep.Stderr())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		want := fmt.Sprintf("from the golden volume\nwritten\nblob golden.txt lost+found mine-%d \n", i)
		if outs[i] != want {
			t.Errorf("episode %d saw %q, want %q", i, outs[i], want)
		}
		if m.ExitCode != 0 || m.Reset <= 0 || m.Ready <= 0 || m.Teardown <= 0 {
			t.Errorf("episode %d metrics: %+v", i, m)
		}
		if mode == reflink.Always {
			// The clone shared everything but what the episode wrote: the
			// 1 MiB blob plus metadata, far below the volume's length.
			if m.CloneMethod != reflink.MethodClone || m.AllocatedBytes < 1<<20 || m.AllocatedBytes > 16<<20 {
				t.Errorf("episode %d: method %v, unshared %d bytes of %d", i, m.CloneMethod, m.AllocatedBytes, m.CloneBytes)
			}
		}
		t.Logf("episode %d: reset %v ready %v run %v teardown %v unshared %d KiB", i, m.Reset, m.Ready, m.Run, m.Teardown, m.AllocatedBytes>>10)
	}
	if !bytes.Equal(fileSum(t, golden), sum) {
		t.Error("the golden volume changed")
	}
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		ents, _ := os.ReadDir(scratch)
		t.Errorf("scratch dir left behind (%v): %v", err, ents)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "golden.ext4" {
		t.Errorf("volume dir holds more than the golden volume: %v", ents)
	}
	before.check(t)
}

// TestPoolTeardown: a timeout, a cancelled context, a failing Ready and a
// panicking function each end their episode with its error, and each tears
// it down: no process, clone or state left.
func TestPoolTeardown(t *testing.T) {
	need(t)
	poolEnv(t)
	dir, mode := poolDirs(t)
	golden := filepath.Join(dir, "golden.ext4")
	makeGolden(t, golden)
	scratch := filepath.Join(dir, "episodes")
	before := takeResidue(t, scratch)
	newPool := func(t *testing.T, cfg gvx.PoolConfig) *gvx.Pool {
		cfg.Golden, cfg.ScratchDir, cfg.CloneMode = golden, scratch, mode
		cfg.Base.Rungv, cfg.Base.OCIImage = rungvBin, imageRef
		if cfg.Base.Cmd == nil {
			cfg.Base.Cmd = []string{"sh", "-c", "echo up; exec sleep 1000"}
		}
		p, err := gvx.NewPool(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	up := func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "up\n") }
	wait := func(ctx context.Context, ep *gvx.Episode) error { _, err := ep.Wait(ctx); return err }

	cases := []struct {
		name string
		cfg  gvx.PoolConfig
		ctx  func() (context.Context, context.CancelFunc)
		fn   func(context.Context, *gvx.Episode) error
		want func(error) bool
	}{
		{"timeout", gvx.PoolConfig{Timeout: 3 * time.Second, Ready: up}, nil, wait,
			func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"cancel", gvx.PoolConfig{Ready: up}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 3*time.Second)
		}, wait, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"exits before ready", gvx.PoolConfig{Ready: up, Base: gvx.Config{Cmd: []string{"sh", "-c", "exit 3"}}}, nil, wait,
			func(err error) bool { return errors.Is(err, gvx.ErrExited) }},
		{"panic", gvx.PoolConfig{Ready: up}, nil, func(ctx context.Context, ep *gvx.Episode) error { panic("boom") },
			func(err error) bool {
				var pe *gvx.PanicError
				return errors.As(err, &pe) && pe.Value == "boom"
			}},
		{"function error", gvx.PoolConfig{Ready: up}, nil, func(ctx context.Context, ep *gvx.Episode) error { return io.ErrUnexpectedEOF },
			func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t, c.cfg)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			start := time.Now()
			ms, err := p.Run(ctx, 2, c.fn)
			if !c.want(err) {
				t.Fatalf("Run: %v", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("Run took %v", d)
			}
			for _, m := range ms {
				if !c.want(m.Err) {
					t.Errorf("episode %d: %v", m.Episode, m.Err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			waitNoSandbox(t)
			if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
				ents, _ := os.ReadDir(scratch)
				t.Errorf("scratch dir left behind: %v", ents)
			}
		})
	}
	before.check(t)
}

// TestPoolSweepsDeadClones: clones that a killed process's pool left are
// removed by the next NewPool; those of live processes and other files
// stay.
func TestPoolSweepsDeadClones(t *testing.T) {
	dir := t.TempDir()
	golden := filepath.Join(dir, "golden.ext4")
	if err := os.WriteFile(golden, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(dir, "eps")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	gone := fmt.Sprintf("ep-%d-0007.ext4", dead.Process.Pid)
	keep := []string{"ep-1-0001.ext4", fmt.Sprintf("ep-%d-0002.ext4", os.Getpid()), "notes.txt", "ep-x-1.ext4"}
	for _, n := range append(keep, gone) {
		if err := os.WriteFile(filepath.Join(scratch, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, _ := os.Executable()
	p, err := gvx.NewPool(gvx.PoolConfig{Golden: golden, ScratchDir: scratch, CloneMode: reflink.Auto,
		Base: gvx.Config{Rungv: exe, OCIImage: "oci:/img"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ents, _ := os.ReadDir(scratch)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(keep)
	if !slices.Equal(names, keep) {
		t.Errorf("scratch holds %v, want %v (%s swept)", names, keep, gone)
	}
}

// TestPoolDocker is issue 7's proof with Docker inside: gvx-vol
// build-golden loads two local images (docker-archive tars) into a golden
// volume with the dindtest docker.io image as the daemon; then 4 episodes
// at once each start dockerd on their own clone, `docker run` both images
// with no network and no load (the images must come from the golden
// volume), tag an image of their own and list the images: each must see
// its own tag and no other episode's. The same runs again through
// `rungv pool` as nobody. The golden volume is bit-identical afterwards and
// nothing is left behind.
func TestPoolDocker(t *testing.T) {
	need(t)
	poolEnv(t)
	layoutDir := dindtest.Layout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, mode := poolDirs(t)
	tars := t.TempDir()
	hello, second := filepath.Join(tars, "hello.tar"), filepath.Join(tars, "second.tar")
	if err := dindtest.WriteHello(hello); err != nil {
		t.Fatal(err)
	}
	if err := retag(strings.TrimPrefix(imageRef, "oci:"), "second:latest", second); err != nil {
		t.Fatal(err)
	}
	binDir := t.TempDir()
	gvxVol := filepath.Join(binDir, "gvx-vol")
	if out, err := exec.Command("go", "build", "-o", binDir+"/", "z.gfire.dev/gvx/cmd/gvx-vol").CombinedOutput(); err != nil {
		t.Fatalf("go build gvx-vol: %v\n%s", err, out)
	}
	golden := filepath.Join(dir, "golden.ext4")
	// Only the guest's own socket: with DOCKER_TLS_CERTDIR empty the
	// entrypoint would also listen on tcp:2375 without TLS, and dockerd
	// 20.10 then waits 15 s before it serves anything.
	daemonFlags := []string{"--iptables=false", "--ip6tables=false", "--host=unix:///var/run/docker.sock"}
	build := exec.CommandContext(ctx, gvxVol, "build-golden", "--rungv", rungvBin, "--daemon-image", "oci:"+layoutDir,
		"--load", hello, "--load", second, "--daemon-arg="+daemonFlags[0], "--daemon-arg="+daemonFlags[1],
		"--ready-timeout", "60s", "--size", "4G", "--json", golden)
	var bout, berr bytes.Buffer
	build.Stdout, build.Stderr = &bout, &berr
	if err := build.Run(); err != nil {
		t.Fatalf("build-golden: %v\n%s", err, berr.String())
	}
	sum := fileSum(t, golden)
	scratch := filepath.Join(dir, "episodes")
	before := takeResidue(t, scratch)

	const n = 4
	script := "dockerd-entrypoint.sh " + strings.Join(daemonFlags, " ") + " >/tmp/dockerd.log 2>&1 &\n" +
		"until docker info >/dev/null 2>&1; do sleep 0.2; done\necho ready\n" +
		"docker run --rm --network=none hello:latest echo hello $GVX_EPISODE || exit 1\n" +
		"docker run --rm --network=none second:latest echo second $GVX_EPISODE || exit 1\n" +
		"docker tag hello:latest mine:ep$GVX_EPISODE || exit 1\n" +
		"docker images --format '{{.Repository}}:{{.Tag}}' | sort | tr '\\n' ' '\n"
	want := func(i int) string {
		return fmt.Sprintf("ready\nhello %d\nsecond %d\nhello:latest mine:ep%d second:latest ", i, i, i)
	}
	pool, err := gvx.NewPool(gvx.PoolConfig{
		Golden:     golden,
		ScratchDir: scratch,
		Parallel:   n,
		Timeout:    5 * time.Minute,
		CloneMode:  mode,
		Base: gvx.Config{
			Rungv: rungvBin, OCIImage: "oci:" + layoutDir,
			Entrypoint: []string{"sh", "-c"}, EntrypointSet: true, Cmd: []string{script},
			Envv: []string{"DOCKER_TLS_CERTDIR="}, NetRaw: true, AllowSUID: true,
		},
		Ready: func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "ready\n") },
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := pool.Run(ctx, n, func(ctx context.Context, ep *gvx.Episode) error {
		code, err := ep.Wait(ctx)
		if err != nil || code != 0 {
			return fmt.Errorf("exit %d, %v; stdout %q stderr %q", code, err, ep.Stdout(), ep.Stderr())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if string(m.Stdout) != want(i) {
			t.Errorf("episode %d printed %q, want %q", i, m.Stdout, want(i))
		}
		t.Logf("episode %d: reset %v ready %v run %v teardown %v unshared %d KiB", i, m.Reset, m.Ready, m.Run, m.Teardown, m.AllocatedBytes>>10)
	}
	if !bytes.Equal(fileSum(t, golden), sum) {
		t.Error("the golden volume changed")
	}
	before.check(t)

	// The same episodes through the CLI, as an unprivileged user.
	if os.Geteuid() != 0 {
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Log("setpriv (util-linux) is missing: skipping the nobody run")
		return
	}
	for _, p := range []string{filepath.Dir(rungvBin), rungvBin, golden} {
		_ = os.Chmod(p, 0o755)
	}
	// t.TempDir makes 0700 directories: open the ones from dir up to the
	// test's own temporary root (named after the test); nothing above it
	// is touched.
	for p := dir; p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&os.ModeSticky != 0 {
			break
		}
		if fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o055)
		}
		if strings.HasPrefix(filepath.Base(p), t.Name()) {
			break
		}
	}
	_ = os.MkdirAll(scratch, 0o755)
	_ = os.Chown(scratch, 65534, 65534)
	tmp := t.TempDir()
	_ = os.Chmod(tmp, 0o777)
	cli := exec.CommandContext(ctx, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		rungvBin, "pool", "--golden", golden, "--scratch", scratch, "-n", fmt.Sprint(n), "-j", fmt.Sprint(n),
		"--clone", mode.String(), "--ready", "ready\n", "--json", "-e", "DOCKER_TLS_CERTDIR=",
		"--entrypoint", "sh", "oci:"+layoutDir, "-c", script)
	cli.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"))
	var cout, cerr bytes.Buffer
	cli.Stdout, cli.Stderr = &cout, &cerr
	if err := cli.Run(); err != nil {
		t.Fatalf("rungv pool as nobody: %v\n%s\n%s", err, cout.String(), cerr.String())
	}
	var rep struct {
		Episodes []struct {
			Episode int     `json:"episode"`
			ReadyMS float64 `json:"ready_ms"`
			Stdout  string  `json:"stdout"`
		} `json:"episodes"`
	}
	if err := json.Unmarshal(cout.Bytes(), &rep); err != nil || len(rep.Episodes) != n {
		t.Fatalf("rungv pool --json: %v\n%s", err, cout.String())
	}
	for _, e := range rep.Episodes {
		if e.Stdout != want(e.Episode) {
			t.Errorf("nobody's episode %d printed %q, want %q", e.Episode, e.Stdout, want(e.Episode))
		}
		t.Logf("nobody's episode %d: ready %.0f ms", e.Episode, e.ReadyMS)
	}
	if !bytes.Equal(fileSum(t, golden), sum) {
		t.Error("the golden volume changed")
	}
	before.check(t)
}

// retag writes the first image of the OCI layout dir as a docker-archive
// tar tagged tag.
func retag(dir, tag, out string) error {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) == 0 {
		return fmt.Errorf("%s: no image", dir)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
