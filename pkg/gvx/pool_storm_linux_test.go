package gvx_test

import (
	"context"
	"os"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
)

// TestWarmRefillProcessStorm: the guest of a warm boot is the image's
// code, and it may start processes by the hundred while the pool's walk
// looks at its tree (each of systrap's address spaces is a host process),
// leave them as zombies, and fork on while the walk sets their priority
// back. The boot is still handed over at the pool's priority, a claim and
// Close still end in bounded time, and nothing is left behind.
func TestWarmRefillProcessStorm(t *testing.T) {
	needAutogroups(t)
	gvx.SetRefillNiceFor(t, 2*time.Second)
	_, base := readAutogroup(os.Getpid())
	cfg, before := warmConfig(t, gvx.PoolConfig{Warm: 1, RefillNice: 17, RefillDelay: -1})
	// 300 sleepers, 300 zombies (their parent execs and never reaps), and
	// short-lived processes forked for the rest of the episode.
	cfg.Base.Cmd = []string{"sh", "-c", `
		for i in $(seq 300); do sleep 1000 & done
		(for i in $(seq 300); do (exit 0) & done; exec sleep 1000) &
		(while :; do /bin/true; done) &
		echo up; exec sleep 1000`}
	ready := cfg.Ready
	var most int
	cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error {
		if err := ready(ctx, ep); err != nil {
			return err
		}
		for range 20 { // the storm runs while the walk is on
			most = max(most, len(gvx.ProcessTree(ep.Sandbox.Pid())))
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	p, err := gvx.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	waitWarm(t, p)
	t.Logf("warm after %v; the boot's host process tree had up to %d processes", time.Since(t0), most)
	t1 := time.Now()
	ep, err := p.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t1); d > 15*time.Second {
		t.Errorf("the claim took %v", d)
	}
	t.Logf("claimed in %v", time.Since(t1))
	if back := treeNice(ep.Sandbox.Pid()); !allAt(back, base) {
		t.Errorf("the claimed episode's autogroups are not at the pool's nice %d: %v", base, back)
	}
	tc := time.Now()
	if err := ep.Close(); err != nil {
		t.Log(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(tc); d > 30*time.Second {
		t.Errorf("Close took %v", d)
	}
	t.Logf("episode and pool closed in %v", time.Since(tc))
	before.check(t)
}
