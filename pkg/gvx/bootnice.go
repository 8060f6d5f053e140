package gvx

import (
	"fmt"
	"time"

	"z.gfire.dev/gvx/pkg/gvx/pool"
)

// BootNiced runs s's boot at a lower CPU priority, as a Pool's warm boots
// run at PoolConfig.RefillNice, for a caller that keeps episodes booted
// ahead of demand itself (the episode server does): call it before s.Run,
// with done closed once Run has returned. From then until restore is
// called, or for at most one second (what keeps a boot behind the claims
// it follows without starving it on a host whose claimed episodes keep
// the CPUs busy), the autogroups of rungv and every process below it run
// at nice n (1–19). restore puts them back at this process's own nice and
// returns once every one has it, or an error naming what refused: call it
// before the episode is handed to anyone, who must not get it niced. rungv
// then starts in a session of its own (its autogroup is the episode's).
//
// n outside 1–19, a caller already at nice n or lower, or a kernel without
// autogroups: no effect, and restore returns nil. See PoolConfig.RefillNice
// for where autogroups do not weigh.
func (s *Sandbox) BootNiced(n int, done <-chan struct{}) (restore func() error) {
	if n < 1 || n > 19 {
		return func() error { return nil }
	}
	tp := newTreePriority(n)
	if tp == nil {
		return func() error { return nil }
	}
	s.ownSession = true
	return tp.background(s, done, nil)
}

// Defaults of PoolConfig.RefillDelay and RefillNice.
const (
	// DefaultRefillDelay is the engine's (pool.DefaultRefillDelay).
	DefaultRefillDelay = pool.DefaultRefillDelay
	// DefaultRefillNice gives a booting replacement about a tenth of a
	// CPU the claimed episodes want (kernel weights 110 against 1024).
	DefaultRefillNice = 10
)

// refillNiceFor bounds how long a warm boot runs niced: long enough for a
// burst of claims' first requests (a GET /info each, tens of ms) to have
// the CPUs, short enough that a pool whose claimed episodes keep the CPUs
// busy still refills in time for the next claim. Without the bound the
// demo's second pass (8 claims from 4 warm, -j 4, 2 CPUs) waited 1.2 s p50
// for replacements starved by the running episodes, against 0.02 ms with
// none niced.
var refillNiceFor = time.Second // a variable for the tests

// How often a warm boot's processes are looked at while it boots: new
// processes inherit their creator's autogroup unless they start a session
// (runsc's sandbox and gofer do), so a pass that finds a new autogroup, or
// one not yet at the boot's nice, comes again after refillNiceFirst, and
// one that finds neither waits twice as long as the last, up to
// refillNiceMost (a boot's later processes are systrap's stubs, in the
// Sentry's session). refillNiceBack bounds the return to the
// pool's priority (unprivileged autogroup writes wait 100 ms for each
// other, host-wide).
const (
	refillNiceFirst = 5 * time.Millisecond
	refillNiceMost  = 400 * time.Millisecond
	refillNiceBack  = 10 * time.Second
)

// background keeps the autogroups of sb's processes (a warm boot; call it
// before sb runs) at the boot's nice until restore, which puts them back
// at the pool's own: restore returns once every one has it, or an error
// naming what refused (the episode must not be handed over niced). done
// is closed when sb has exited; urgent when a claimer waits for this
// boot, which then goes on at the pool's priority at once.
func (tp *treePriority) background(sb *Sandbox, done, urgent <-chan struct{}) (restore func() error) {
	w := tp.walk()
	stop, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		seen := map[string]bool{}
		every := refillNiceFirst
		enough := time.NewTimer(refillNiceFor)
		defer enough.Stop()
		select {
		case <-urgent:
			return // a claimer waits for it already: never niced
		default:
		}
		for {
			if pid := sb.Pid(); pid > 0 {
				w.update(pid)
				// An autogroup that refuses stays at the pool's priority (restore reports it).
				settled, grew, _ := w.set(true, seen)
				if !settled || grew {
					every = refillNiceFirst
				} else {
					every = min(every*2, refillNiceMost)
				}
			}
			t := time.NewTimer(every)
			select {
			case <-stop:
			case <-done:
			case <-urgent: // a claimer waits for it: not niced from now on
				_ = w.back(sb, done) // restore reports what refuses
			case <-enough.C: // the claims it waited behind are served
				_ = w.back(sb, done)
			case <-t.C:
				continue
			}
			t.Stop()
			return
		}
	}()
	return func() error {
		close(stop)
		<-ended
		return w.back(sb, done)
	}
}

// back puts the autogroups the walk lowered back at the pool's nice: it
// returns once every one has it, or an error naming what refused.
func (w *treeWalk) back(sb *Sandbox, done <-chan struct{}) error {
	pid := sb.Pid()
	if pid <= 0 {
		return nil
	}
	deadline := time.Now().Add(refillNiceBack)
	for {
		w.update(pid)
		settled, _, err := w.set(false, map[string]bool{})
		switch {
		case err != nil:
			return err
		case settled:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("gvx: a warm episode's processes were not all back at the pool's priority after %v (PoolConfig.RefillNice -1 leaves boots at it)", refillNiceBack)
		}
		select {
		case <-done:
			return nil
		case <-time.After(refillNiceFirst):
		}
	}
}
