package gvx

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

func TestNewPoolRefuses(t *testing.T) {
	dir := t.TempDir()
	golden := filepath.Join(dir, "golden.ext4")
	if err := os.WriteFile(golden, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable() // any existing file stands for rungv here
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Rungv: exe, OCIImage: "oci:/img"}
	ok := PoolConfig{Golden: golden, ScratchDir: filepath.Join(dir, "eps"), Base: base, CloneMode: reflink.Auto}
	cases := []struct {
		name string
		edit func(*PoolConfig)
		want string
	}{
		{"no golden", func(c *PoolConfig) { c.Golden = "" }, "needs Golden"},
		{"missing golden", func(c *PoolConfig) { c.Golden = filepath.Join(dir, "nope") }, "no such file"},
		{"golden is a dir", func(c *PoolConfig) { c.Golden = dir }, "not a regular file"},
		{"negative parallel", func(c *PoolConfig) { c.Parallel = -1 }, "negative"},
		{"stdin", func(c *PoolConfig) { c.Base.Stdin = strings.NewReader("x") }, "Stdin"},
		{"no image", func(c *PoolConfig) { c.Base.OCIImage = "" }, "OCIImage"},
		{"no rungv", func(c *PoolConfig) { c.Base.Rungv = filepath.Join(dir, "no-rungv") }, "rungv binary not found"},
		{"mount clash", func(c *PoolConfig) {
			c.Base.Mounts = []Mount{{Kind: MountTmpfs, GuestPath: DefaultVolumePath}}
		}, "already mounts"},
		{"relative guest path", func(c *PoolConfig) { c.GuestPath = "data" }, "not an absolute guest path"},
		{"mount clash, spelled differently", func(c *PoolConfig) {
			c.Base.Mounts = []Mount{{Kind: MountTmpfs, GuestPath: DefaultVolumePath + "/"}}
		}, "already mounts"},
		{"spec and Base", func(c *PoolConfig) { c.Spec = spec.New("oci:/img") }, "may set only Rungv"},
		{"negative warm", func(c *PoolConfig) { c.Warm = -1 }, "negative"},
		{"negative warm memory", func(c *PoolConfig) { c.WarmMemory = -1 }, "negative"},
		{"bad socket name", func(c *PoolConfig) { c.Sockets = map[string]int{"../x": 2375} }, "want 1-16 of [a-z0-9_-]"},
		{"bad socket port", func(c *PoolConfig) { c.Sockets = map[string]int{"docker": 0} }, "is not a TCP port"},
		{"socket path too long", func(c *PoolConfig) {
			c.ScratchDir = filepath.Join(dir, strings.Repeat("d", 100))
			c.Sockets = map[string]int{"docker": 2375}
		}, "use a shorter ScratchDir"},
		{"bad spec", func(c *PoolConfig) {
			c.Base = Config{Rungv: exe}
			c.Spec = &spec.Spec{Version: spec.Version}
		}, "PoolConfig.Spec: image: is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			p, err := NewPool(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewPool = %v, %v; want an error with %q", p, err, c.want)
			}
		})
	}
	p, err := NewPool(ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), 1, nil); err == nil {
		t.Error("Run with a nil function succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ok.ScratchDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the scratch dir it made: %v", err)
	}
	if _, err := p.Run(context.Background(), 1, func(context.Context, *Episode) error { return nil }); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if ep, err := p.Claim(context.Background()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Claim after Close: %v, %v", ep, err)
	}
	if err := p.WaitWarm(context.Background()); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("WaitWarm after Close: %v", err)
	}
}

// TestRunCancelledBeforeStart: episodes that never started report the
// context's error and leave nothing behind.
func TestRunCancelledBeforeStart(t *testing.T) {
	dir := t.TempDir()
	golden := filepath.Join(dir, "golden.ext4")
	if err := os.WriteFile(golden, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	p, err := NewPool(PoolConfig{Golden: golden, ScratchDir: filepath.Join(dir, "eps"), Parallel: 2, CloneMode: reflink.Auto,
		Base: Config{Rungv: exe, OCIImage: "oci:/img"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ms, err := p.Run(ctx, 3, func(context.Context, *Episode) error { t.Error("episode ran"); return nil })
	if !errors.Is(err, context.Canceled) || len(ms) != 3 {
		t.Fatalf("Run = %d metrics, %v", len(ms), err)
	}
	for i, m := range ms {
		if m.Episode != i || !errors.Is(m.Err, context.Canceled) {
			t.Errorf("metrics %d: %+v", i, m)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "eps")); len(ents) != 0 {
		t.Errorf("left in scratch: %v", ents)
	}
}

func TestSummarize(t *testing.T) {
	var ms []Metrics
	for i := 1; i <= 20; i++ {
		ms = append(ms, Metrics{Episode: i, Reset: time.Duration(i) * time.Millisecond, Teardown: time.Millisecond, AllocatedBytes: int64(i)})
	}
	ms[0].Err = errors.New("x")
	s := Summarize(ms, 4, 30*time.Second)
	if s.Episodes != 20 || s.Failed != 1 || s.PerMinute != 38 {
		t.Errorf("counts: %+v", s)
	}
	if s.Reset.P50 != 11*time.Millisecond || s.Reset.P95 != 20*time.Millisecond || s.Reset.Max != 20*time.Millisecond {
		t.Errorf("reset quantiles: %+v", s.Reset)
	}
	if s.Ready != (Quantiles{}) || s.AllocatedBytes != 11 {
		t.Errorf("ready %+v alloc %d", s.Ready, s.AllocatedBytes)
	}
}

func TestCaptureLimitAndWait(t *testing.T) {
	ep := &Episode{done: make(chan struct{}), code: 5}
	ep.stdout = &capture{limit: 8, changed: make(chan struct{})}
	go func() {
		ep.stdout.Write([]byte("hello "))
		ep.stdout.Write([]byte("world, long line"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ep.WaitOutput(ctx, "hello w"); err != nil {
		t.Fatal(err)
	}
	if got := string(ep.Stdout()); got != "hello wo" {
		t.Errorf("kept %q, want the first 8 bytes", got)
	}
	ep.stdout.close()
	close(ep.done)
	if err := ep.WaitOutput(ctx, "never"); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "status 5") {
		t.Errorf("WaitOutput after exit: %v", err)
	}
}

// Example runs 64 episodes, 8 at a time, each on its own clone of a golden
// /var/lib/docker volume, with the daemon image's entrypoint starting
// dockerd; an episode is ready once the guest prints "ready".
func ExampleNewPool() {
	ctx := context.Background()
	pool, err := NewPool(PoolConfig{
		Golden:     "/srv/rl-snapshots/golden-docker.ext4",
		ScratchDir: "/srv/rl-episodes",
		Parallel:   8,
		Timeout:    10 * time.Minute,
		Base: Config{
			OCIImage:      "oci:/srv/images/dind",
			Entrypoint:    []string{"sh", "-c"},
			EntrypointSet: true,
			Cmd: []string{"dockerd-entrypoint.sh --iptables=false >/var/log/dockerd.log 2>&1 & " +
				"until docker info >/dev/null 2>&1; do sleep 0.1; done; echo ready; " +
				"docker run --rm python:3.11-slim python -c 'print(6 * 7)'"},
			Envv: []string{"DOCKER_TLS_CERTDIR="},
		},
		Ready: func(ctx context.Context, ep *Episode) error { return ep.WaitOutput(ctx, "ready\n") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	metrics, err := pool.Run(ctx, 64, func(ctx context.Context, ep *Episode) error {
		code, err := ep.Wait(ctx)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit status %d: %s", code, ep.Stderr())
		}
		return err
	})
	s := Summarize(metrics, 8, 0)
	log.Printf("%d failed; reset p50 %v, ready p50 %v, teardown p50 %v (%v)", s.Failed, s.Reset.P50, s.Ready.P50, s.Teardown.P50, err)
}
