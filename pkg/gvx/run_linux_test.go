package gvx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/runtime/runtimetest"
)

var (
	rungvBin string
	imageRef string
	setupErr error
)

func TestMain(m *testing.M) {
	if os.Getenv("GVX_TEST_CALLER") != "" {
		os.Exit(runCaller())
	}
	os.Exit(func() int {
		env, err := runtimetest.NewEnv("gvx-sdk-test-", v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}})
		if env.Dir != "" {
			defer os.RemoveAll(env.Dir)
		}
		rungvBin, imageRef, setupErr = env.Rungv, env.ImageRef, err
		return m.Run()
	}())
}

func need(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	if os.Getuid() != 0 {
		runtimetest.NeedUserNamespace(t, rungvBin, "")
	}
}

func newSandbox(t *testing.T, ctx context.Context, cfg gvx.Config) *gvx.Sandbox {
	t.Helper()
	cfg.Rungv = rungvBin
	cfg.OCIImage = imageRef
	sb, err := gvx.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func TestRun(t *testing.T) {
	need(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	sb := newSandbox(t, ctx, gvx.Config{
		Platform:      gvx.PlatformAuto,
		NetworkMode:   gvx.NetModeNone,
		Entrypoint:    []string{"sh", "-c"},
		EntrypointSet: true,
		Cmd:           []string{"echo hi $GREETING; echo oops >&2; exit 7"},
		Envv:          []string{"GREETING=there"},
		Stdout:        &out,
		Stderr:        &errb,
	})
	code, err := sb.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code != 7 || out.String() != "hi there\n" || errb.String() != "oops\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
	if _, err := sb.Run(ctx); !errors.Is(err, gvx.ErrRunning) {
		t.Fatalf("second Run: %v, want ErrRunning", err)
	}
}

func TestMountsAndResources(t *testing.T) {
	need(t)
	ctx := context.Background()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sb := newSandbox(t, ctx, gvx.Config{
		Cmd: []string{"sh", "-c", "cat /in/in.txt; echo x > /scratch/f && cat /scratch/f; nproc; awk '/MemTotal/{print $2}' /proc/meminfo"},
		Mounts: []gvx.Mount{
			{Kind: gvx.MountBind, ImagePath: host, GuestPath: "/in", ReadOnly: true},
			{Kind: gvx.MountTmpfs, GuestPath: "/scratch"},
		},
		Resources: gvx.Resources{MemoryBytes: 512 << 20, CPUMillis: 1500},
		Stdout:    &out,
	})
	code, err := sb.Run(ctx)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; output %q", code, err, out.String())
	}
	if want := fmt.Sprintf("from host\nx\n2\n%d\n", 512<<10); out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// TestCancel: cancelling the context kills the episode promptly.
func TestCancel(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	sb := newSandbox(t, ctx, gvx.Config{Cmd: []string{"sleep", "1000"}})
	start := time.Now()
	_, err := sb.Run(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Run returned %v after start; cancel did not kill promptly", d)
	}
	waitNoSandbox(t)
}

// TestCloseDuringRun: Close from another goroutine ends Run.
func TestCloseDuringRun(t *testing.T) {
	need(t)
	ctx := context.Background()
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	sb := newSandbox(t, ctx, gvx.Config{Cmd: []string{"sh", "-c", "echo up; exec sleep 1000"}, Stdout: pw})
	res := make(chan error, 1)
	go func() { _, err := sb.Run(ctx); res <- err }()
	buf := make([]byte, 3)
	if _, err := pr.Read(buf); err != nil || string(buf) != "up\n" {
		t.Fatalf("guest did not start: %q %v", buf, err)
	}
	pw.Close()
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	waitNoSandbox(t)
}

func TestRungvErrorIsAnError(t *testing.T) {
	need(t)
	ctx := context.Background()
	sb, err := gvx.New(ctx, gvx.Config{Rungv: rungvBin, OCIImage: "oci:/nonexistent/layout", Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	code, err := sb.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/layout") {
		t.Fatalf("Run = %d, %v; want an error naming the image", code, err)
	}
}

// waitNoSandbox waits until no process runs rungvBin.
func waitNoSandbox(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
			if err == nil && strings.HasPrefix(exe, rungvBin) {
				if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !bytes.Contains(st, []byte(") Z ")) {
					left = append(left, e.Name())
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rungv processes left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runCaller is the re-executed test binary of TestCallerKilledTakesEpisode:
// it runs one long episode and is SIGKILLed by the test.
func runCaller() int {
	f := strings.SplitN(os.Getenv("GVX_TEST_CALLER"), "|", 2)
	sb, err := gvx.New(context.Background(), gvx.Config{Rungv: f[0], OCIImage: f[1],
		Cmd: []string{"sh", "-c", "echo started; sleep 300"}, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb.Run(context.Background())
	return 0
}

// TestCallerKilledTakesEpisode: when the program using the SDK dies by
// SIGKILL, its episodes die with it (no rungv process is left running).
func TestCallerKilledTakesEpisode(t *testing.T) {
	need(t)
	// A private copy of rungv, so its processes are told apart by exe.
	bin := filepath.Join(t.TempDir(), "rungv-caller")
	data, err := os.ReadFile(rungvBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	caller := exec.Command(os.Args[0], "-test.run=^$")
	caller.Env = append(os.Environ(), "GVX_TEST_CALLER="+bin+"|"+imageRef)
	out, err := caller.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	caller.Stderr = os.Stderr
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 8)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "started\n" {
		caller.Process.Kill()
		t.Fatalf("episode did not start: %q %v", line, err)
	}
	if n := countExe(bin); n == 0 {
		t.Fatal("no rungv process found while the episode runs")
	}
	caller.Process.Kill()
	caller.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for countExe(bin) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rungv processes outlived their SIGKILLed caller", countExe(bin))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countExe counts live processes running the executable at path.
func countExe(path string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && strings.TrimSuffix(exe, " (deleted)") == path {
			if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
				n++
			}
		}
	}
	return n
}

// TestOpenUnlinkedOnVolume: inside an episode, a file on a volume that is
// unlinked while open is truncated, rewritten, reopened through
// /proc/self/fd and read as on a kernel ext4 mount (what pytest's
// capture does with tempfile.TemporaryFile): the Sentry's ftruncate of it
// failed with EINVAL, so a project had to mount a tmpfs on /tmp to run its
// tests. The volume is the guest's /tmp itself, made by mktemp (no tmpfs
// there: /proc/mounts shows the volume, a gofer mount, as 9p), as for a
// project whose containers keep /tmp on the Docker data root. The volume
// is e2fsck-clean afterwards and holds no trace of it.
func TestOpenUnlinkedOnVolume(t *testing.T) {
	need(t)
	ctx := context.Background()
	vol := filepath.Join(t.TempDir(), "v.ext4")
	var out, errb bytes.Buffer
	script := `set -e; cd /tmp
awk '$2 == "/tmp" {print "tmp is", $3}' /proc/mounts
f=$(mktemp)
exec 3<>$f
echo "first output, to be dropped" >&3
rm $f
truncate -s 0 /proc/self/fd/3
echo "kept" | dd of=/proc/self/fd/3 conv=notrunc 2>/dev/null
echo size $(wc -c </proc/self/fd/3)
cat /proc/self/fd/3
exec 3>&-
ls -A /tmp`
	sb := newSandbox(t, ctx, gvx.Config{
		NetworkMode: gvx.NetModeNone,
		Cmd:         []string{"sh", "-c", script},
		Mounts:      []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: "/tmp"}},
		Stdout:      &out,
		Stderr:      &errb,
	})
	code, err := sb.Run(ctx)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; stdout %q stderr %q", code, err, out.String(), errb.String())
	}
	// (fstat's st_nlink of the open file is 1 inside, not Linux's 0: the
	// Sentry's gofer client shows a cached count of 0 as 1, in
	// pkg/sentry/fsimpl/gofer's statTo; the volume server says 0.)
	if want := "tmp is 9p\nsize 5\nkept\nlost+found\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", out.String(), want, errb.String())
	}
	if _, err := exec.LookPath("e2fsck"); err == nil {
		if b, err := exec.Command("e2fsck", "-fn", vol).CombinedOutput(); err != nil {
			t.Fatalf("e2fsck -fn: %v\n%s", err, b)
		}
	}
}
