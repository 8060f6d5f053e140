package gvx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// treeNice is the nice of every autogroup of the process tree at pid
// other than this process's, by name.
func treeNice(pid int) map[string]int {
	own, _ := readAutogroup(os.Getpid())
	groups := map[string]int{}
	for _, p := range gvx.ProcessTree(pid) {
		if g, n := readAutogroup(p); g != "" && g != own {
			groups[g] = n
		}
	}
	return groups
}

// allAt reports whether there are groups and all have nice n.
func allAt(groups map[string]int, n int) bool {
	for _, v := range groups {
		if v != n {
			return false
		}
	}
	return len(groups) > 0
}

func needAutogroups(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		t.Skipf("no autogroups on this kernel (CONFIG_SCHED_AUTOGROUP): %v", err)
	}
}

// waitTreeNice waits up to 20 s until every autogroup of ep's processes
// (other than this process's) is at nice n; it returns the last seen.
func waitTreeNice(ep *gvx.Episode, n int) (map[string]int, bool) {
	var groups map[string]int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if groups = treeNice(ep.Sandbox.Pid()); allAt(groups, n) {
			return groups, true
		}
	}
	return groups, false
}

func readAutogroup(pid int) (string, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 3 {
		return "", 0
	}
	n, _ := strconv.Atoi(f[2])
	return f[0], n
}

// TestWarmRefillNice: a warm boot runs at RefillNice while it boots (its
// Ready sees every autogroup of its own sessions there: rungv's, the
// Sentry's, the gofer's), and once ready it is back at the pool's priority
// before anyone can claim it, so a claimed episode runs at full weight.
// The replacement of a claimed one boots niced as well, and the pool
// refills. It sets no thread's nice (systrap derives its stub threads'
// from the Sentry's). Root and nobody alike: an autogroup's owner may
// raise its nice and set it back.
func TestWarmRefillNice(t *testing.T) {
	needAutogroups(t)
	for _, iso := range []spec.Isolation{spec.IsolationAuto, spec.IsolationSeccompOnly} {
		t.Run(string(iso), func(t *testing.T) { testWarmRefillNice(t, iso) })
	}
}

func testWarmRefillNice(t *testing.T, iso spec.Isolation) {
	const nice = 17
	gvx.SetRefillNiceFor(t, time.Hour) // a slow boot is niced to its end
	_, base := readAutogroup(os.Getpid())
	cfg, before := warmConfig(t, gvx.PoolConfig{Warm: 1, RefillNice: nice, RefillDelay: -1})
	s, err := cfg.Base.Spec()
	if err != nil {
		t.Fatal(err)
	}
	s.Isolation = iso
	cfg.Spec, cfg.Base = s, gvx.Config{Rungv: cfg.Base.Rungv}
	ready := cfg.Ready
	seen := make(chan map[string]int, 8)
	cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error {
		if err := ready(ctx, ep); err != nil {
			return err
		}
		// The pool sets the boot's autogroups every 50 ms: wait for a
		// pass that found the Sentry's.
		groups, ok := waitTreeNice(ep, nice)
		if !ok {
			return fmt.Errorf("the booting episode never ran at nice %d: %v", nice, groups)
		}
		seen <- groups
		return nil
	}
	p, err := gvx.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 2 { // the first warm one, then a claim's replacement
		waitWarm(t, p)
		t.Logf("round %d: booted at nice %d in autogroups %v", round, nice, <-seen)
		ep, err := p.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if back := treeNice(ep.Sandbox.Pid()); !allAt(back, base) {
			t.Errorf("round %d: a claimed episode's autogroups are not at the pool's nice %d: %v", round, base, back)
		}
		for _, p := range gvx.ProcessTree(ep.Sandbox.Pid()) {
			if prio, err := unix.Getpriority(unix.PRIO_PROCESS, p); err == nil && 20-prio > 1 {
				t.Errorf("round %d: episode process %d runs at nice %d (systrap's stubs run at 1)", round, p, 20-prio)
			}
		}
		if err := ep.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if iso == spec.IsolationSeccompOnly {
		// No supervisor there: a killed episode leaves its state
		// directory to the next rungv start's sweep (as TestWarmRestore).
		if out, err := exec.Command(rungvBin, "run", "--isolation", "seccomp-only", "--network", "none", imageRef, "true").CombinedOutput(); err != nil {
			t.Fatalf("rungv run true: %v: %s", err, out)
		}
	}
	before.check(t)
}

// TestWarmRefillDelay: a claimed warm episode's replacement does not start
// before RefillDelay (no clone of it in the scratch dir meanwhile), then
// boots and the pool is warm again; and a claim that finds none ready ends
// the wait at once (with a delay of an hour it still gets one).
func TestWarmRefillDelay(t *testing.T) {
	const delay = 1500 * time.Millisecond
	p, scratch, before := warmPool(t, gvx.PoolConfig{Warm: 1, RefillDelay: delay})
	defer p.Close()
	waitWarm(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	ep, err := p.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	time.Sleep(delay * 2 / 3)
	if clones, _ := filepath.Glob(filepath.Join(scratch, "ep-*.ext4")); len(clones) != 1 || time.Since(t0) >= delay {
		t.Errorf("%v after the claim (RefillDelay %v) the scratch dir holds %v, want only the claimed clone", time.Since(t0), delay, clones)
	}
	if st := p.WarmStats(); st.Booting != 1 {
		t.Errorf("the delayed replacement is not counted as booting: %+v", st)
	}
	waitWarm(t, p)
	if d := time.Since(t0); d < delay {
		t.Errorf("the replacement was ready %v after the claim, before RefillDelay %v", d, delay)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	scratchEmpty(t, scratch)

	p, scratch, _ = warmPool(t, gvx.PoolConfig{Warm: 1, RefillDelay: time.Hour})
	defer p.Close()
	waitWarm(t, p)
	a, err := p.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	t1 := time.Now()
	b, err := p.Claim(ctx) // none ready: its replacement must boot now
	if err != nil {
		t.Fatalf("a claim waiting behind an hour's RefillDelay: %v", err)
	}
	defer b.Close()
	if a.ID == b.ID {
		t.Errorf("both claims got episode %d", a.ID)
	}
	t.Logf("a waiting claim got the hurried replacement in %v", time.Since(t1))
	tc := time.Now()
	if err := p.Close(); err != nil { // with a boot waiting its hour
		t.Fatal(err)
	}
	if d := time.Since(tc); d > time.Minute {
		t.Errorf("Close took %v with a delayed boot", d)
	}
	scratchEmpty(t, scratch)
	before.check(t)
}

// TestRefillNiceBounds: RefillNice above 19 is refused.
func TestRefillNiceBounds(t *testing.T) {
	cfg, _ := warmConfig(t, gvx.PoolConfig{Warm: 1, RefillNice: 20})
	if _, err := gvx.NewPool(cfg); err == nil || !strings.Contains(err.Error(), "RefillNice") {
		t.Errorf("RefillNice 20: %v", err)
	}
}

// TestWarmRefillUrgent: a boot a claimer waits for is on the claimer's
// critical path, so it stops running at RefillNice: its autogroups are
// back at the pool's nice before its Ready passes (while the boot nobody
// waits for runs niced until Ready). It failed before: the demo's second
// pass, 8 claims from 4 warm while 4 episodes ran, waited 1.7 s p50 for
// replacements booting at nice 10.
func TestWarmRefillUrgent(t *testing.T) {
	needAutogroups(t)
	const nice = 17
	gvx.SetRefillNiceFor(t, time.Hour) // only the waiting claimer ends it
	_, base := readAutogroup(os.Getpid())
	cfg, _ := warmConfig(t, gvx.PoolConfig{Warm: 1, RefillNice: nice, RefillDelay: -1})
	ready := cfg.Ready
	var boots atomic.Int32
	waiting := make(chan struct{})
	cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error {
		if err := ready(ctx, ep); err != nil {
			return err
		}
		if boots.Add(1) != 2 {
			return nil // the first warm one: nobody waits for it
		}
		select {
		case <-waiting:
		case <-ctx.Done():
			return ctx.Err()
		}
		if groups, ok := waitTreeNice(ep, base); !ok {
			return fmt.Errorf("a boot a claimer waits for still runs niced at its Ready: %v (want all at %d)", groups, base)
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
	waitWarm(t, p)
	first, err := p.Claim(ctx) // its replacement starts to boot, niced
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	close(waiting)
	second, err := p.Claim(ctx) // waits for that replacement
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if m := second.Metrics(); m.Claim <= 0 {
		t.Errorf("the second claim did not wait: %+v", m)
	}
}

// TestWarmRefillNiceBounded: a warm boot runs niced for a bounded time
// only (refillNiceFor), so that a pool whose running episodes keep the
// CPUs busy still refills: a boot whose Ready takes longer than the bound
// is back at the pool's nice before its Ready passes, with no claimer
// waiting.
func TestWarmRefillNiceBounded(t *testing.T) {
	needAutogroups(t)
	gvx.SetRefillNiceFor(t, 300*time.Millisecond)
	_, base := readAutogroup(os.Getpid())
	cfg, _ := warmConfig(t, gvx.PoolConfig{Warm: 1, RefillNice: 17, RefillDelay: -1})
	ready := cfg.Ready
	cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error {
		if err := ready(ctx, ep); err != nil {
			return err
		}
		if groups, ok := waitTreeNice(ep, base); !ok {
			return fmt.Errorf("a boot past refillNiceFor still runs niced: %v (want all at %d)", groups, base)
		}
		return nil
	}
	p, err := gvx.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitWarm(t, p)
}
