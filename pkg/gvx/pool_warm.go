package gvx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The warm pool (PoolConfig.Warm): episodes booted ahead of demand.
//
// Every field of warmState is guarded by Pool.mu. An episode is in exactly
// one of: booting (counted), ready (in the list), handed out (its handed
// flag set, by the one claimer that took it from the list under mu), or
// torn down. Taking from the list under mu is what makes a handover
// exclusive; the flag is the check that it stayed so.
type warmState struct {
	ready   []*Episode
	booting int
	// live is every episode the pool started for Claim and the warm
	// list, not yet torn down: what Close must tear down.
	live map[*Episode]struct{}
	// wake is closed (and replaced) whenever the state changes, for
	// claimers waiting for a warm episode.
	wake chan struct{}
	// estimate is the largest idle memory measured (for WarmMemory).
	estimate int64
	// failures counts warm boots failed in a row (for the backoff), err
	// is the last one's error (cleared by a success).
	failures int
	err      error
	boots    sync.WaitGroup
	next     int // the next warm episode's ID
	// starting are the episodes of boots whose rungv has started.
	starting map[*Episode]struct{}
	// hurry is closed to end the RefillDelay of the boots waiting it
	// (a claimer found no warm episode ready); nil when none waits.
	hurry chan struct{}
	// urgent is closed to end RefillNice for the boots in flight (a
	// claimer waits for one); nil until a boot takes it.
	urgent chan struct{}
}

func (w *warmState) init() {
	w.live = map[*Episode]struct{}{}
	w.starting = map[*Episode]struct{}{}
	w.wake = make(chan struct{})
}

// changed wakes the waiting claimers.
func (w *warmState) changed() {
	close(w.wake)
	w.wake = make(chan struct{})
}

// WarmStats is a snapshot of the warm pool.
type WarmStats struct {
	// Ready are the warm episodes waiting for a claim, Booting those
	// being booted to join them.
	Ready, Booting int
	// Target is how many the pool keeps now: Warm, or fewer under
	// WarmMemory.
	Target int
	// ReadyMemory is the idle memory of the Ready ones together (bytes,
	// as Metrics.IdleMemory); MaxEpisodeMemory the largest one measured.
	ReadyMemory, MaxEpisodeMemory int64
	// Err is the last warm boot's error, if it failed.
	Err error
}

// WarmStats returns what the warm pool holds now.
func (p *Pool) WarmStats() WarmStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := &p.warm
	return WarmStats{Ready: len(w.ready), Booting: w.booting, Target: p.warmTarget(),
		ReadyMemory: p.readyMemory(), MaxEpisodeMemory: w.estimate, Err: w.err}
}

// WaitWarm waits until the warm pool holds its target of ready episodes
// (WarmStats.Target), or fails with the last warm boot's error once a boot
// failed and none is ready or booting.
func (p *Pool) WaitWarm(ctx context.Context) error {
	p.fillWarm()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return ErrPoolClosed
		}
		w := &p.warm
		if len(w.ready) >= p.warmTarget() && w.booting == 0 {
			p.mu.Unlock()
			return nil
		}
		if w.err != nil && len(w.ready) == 0 {
			err := w.err
			p.mu.Unlock()
			return fmt.Errorf("gvx: warm episode did not boot: %w", err)
		}
		wake := w.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// warmTarget is how many warm episodes the pool keeps now. Call with mu.
func (p *Pool) warmTarget() int {
	w, n := &p.warm, p.cfg.Warm
	if p.cfg.WarmMemory > 0 {
		switch {
		case w.estimate > 0:
			n = min(n, int(p.cfg.WarmMemory/w.estimate))
		case len(w.ready)+w.booting > 0:
			n = min(n, 1) // learn the cost of one first
		}
	}
	return n
}

func (p *Pool) readyMemory() int64 {
	var sum int64
	for _, ep := range p.warm.ready {
		sum += max(ep.m.IdleMemory, 0)
	}
	return sum
}

// Defaults of PoolConfig.RefillDelay and RefillNice.
const (
	// DefaultRefillDelay is about what a burst of docker info claims at 8
	// on 2 CPUs takes (docs/runtime.md, "Warm pools"): a replacement's
	// boot is ~2 s of CPU, so the wait costs its refill ~10 %.
	DefaultRefillDelay = 250 * time.Millisecond
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

// fillWarm starts warm boots up to the target.
func (p *Pool) fillWarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fillWarmLocked()
}

func (p *Pool) fillWarmLocked() { p.fillWarmAfter(0) }

// fillWarmAfter starts warm boots up to the target, each after delay (a
// claim's replacement: RefillDelay) unless hurried. Call with mu.
func (p *Pool) fillWarmAfter(delay time.Duration) {
	w := &p.warm
	for !p.closed && len(w.ready)+w.booting < p.warmTarget() {
		w.booting++
		w.boots.Add(1)
		id := w.next
		w.next++
		p.seq.Lock()
		seq := p.next
		p.next++
		p.seq.Unlock()
		backoff := time.Duration(0)
		if w.failures > 0 {
			backoff = min(100*time.Millisecond<<min(w.failures, 7), 10*time.Second)
		}
		var hurry chan struct{}
		if delay > 0 {
			if w.hurry == nil {
				w.hurry = make(chan struct{})
			}
			hurry = w.hurry
		}
		if w.urgent == nil {
			w.urgent = make(chan struct{})
		}
		go p.bootWarm(id, seq, backoff, delay, hurry, w.urgent)
	}
}

// hurryLocked ends the RefillDelay of the boots waiting it, and the
// RefillNice of those in flight: a claimer waits for them. Call with mu.
func (w *warmState) hurryLocked() {
	if w.hurry != nil {
		close(w.hurry)
		w.hurry = nil
	}
	if w.urgent != nil {
		close(w.urgent)
		w.urgent = nil
	}
}

// bootWarm boots one warm episode after backoff and then delay (which
// hurry ends early), and puts it on the ready list, or tears it down when
// it failed or does not fit WarmMemory.
func (p *Pool) bootWarm(id, seq int, backoff, delay time.Duration, hurry, urgent <-chan struct{}) {
	defer p.warm.boots.Done()
	select {
	case <-time.After(backoff):
	case <-p.ctx.Done():
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-hurry:
		case <-p.ctx.Done():
		}
		t.Stop()
	}
	ctx, cancel := p.ctx, context.CancelFunc(func() {})
	if p.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
	}
	var ep *Episode
	var err error
	if err = p.ctx.Err(); err == nil {
		ep, err = p.boot(p.ctx, ctx, id, seq, &warmBoot{urgent: urgent})
	}
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	w := &p.warm
	w.booting--
	defer w.changed()
	switch {
	case err != nil:
		if !p.closed {
			w.failures++
			w.err = err
			p.fillWarmLocked()
		}
		return
	case p.closed:
		p.teardown(ep)
		return
	}
	w.failures, w.err = 0, nil
	w.estimate = max(w.estimate, ep.m.IdleMemory)
	if p.cfg.WarmMemory > 0 {
		m := ep.m.IdleMemory
		if m < 0 {
			w.err = errors.New("gvx: cannot measure a warm episode's memory here (PoolConfig.WarmMemory needs Linux's /proc and a Ready); keeping none warm")
			w.failures++
			p.discardLocked(ep)
			return
		}
		if p.readyMemory()+m > p.cfg.WarmMemory {
			p.discardLocked(ep) // over the cap: the target shrinks below
			p.fillWarmLocked()
			return
		}
	}
	w.ready = append(w.ready, ep)
	w.live[ep] = struct{}{}
	// A warm episode that dies while it waits leaves the list.
	go func() {
		<-ep.done
		p.mu.Lock()
		i := slices.Index(p.warm.ready, ep)
		if i >= 0 {
			p.warm.ready = slices.Delete(p.warm.ready, i, i+1)
			p.warm.changed()
		}
		p.mu.Unlock()
		if i >= 0 {
			p.release(ep)
			p.fillWarm()
		}
	}()
	p.fillWarmLocked()
}

// discardLocked tears ep down in the background; Close waits for it.
// Call with mu, from a boot (so the WaitGroup is not at zero).
func (p *Pool) discardLocked(ep *Episode) {
	p.warm.boots.Add(1)
	go func() {
		defer p.warm.boots.Done()
		p.teardown(ep)
	}()
}

// release tears ep down and forgets it.
func (p *Pool) release(ep *Episode) {
	p.teardown(ep)
	p.mu.Lock()
	delete(p.warm.live, ep)
	p.mu.Unlock()
}

// startGrace bounds how long Close lets boots in progress finish.
const startGrace = 30 * time.Second

// letStartersSettle (Close, before it kills) waits until no boot is in
// progress, or startGrace has passed: a rungv killed while it starts (before
// its supervisor is in place) leaves its state directory in TMPDIR for the
// next rungv start to sweep (runtime/state_linux.go), which is not
// "nothing behind", while one killed once it runs leaves nothing. A boot
// ends when Ready passes or fails (PoolConfig.Timeout bounds it).
func (p *Pool) letStartersSettle() {
	deadline := time.Now().Add(startGrace)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		n := len(p.warm.starting)
		p.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopWarm (Close, after the pool's context is cancelled) waits for the
// boots and tears down every episode left.
func (p *Pool) stopWarm() {
	p.warm.boots.Wait()
	p.mu.Lock()
	left := make([]*Episode, 0, len(p.warm.live))
	for ep := range p.warm.live {
		left = append(left, ep)
	}
	p.warm.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, ep := range left {
		wg.Go(func() { p.release(ep) })
	}
	wg.Wait()
}

// Claim hands over a ready episode (Ready has passed; a warm one's guest
// is still running) that no other Claim or Run gets. With Warm it takes
// the oldest warm one (waiting for the next if none is ready), and the
// pool boots its replacement: the handover itself takes microseconds, and
// the caller's first request to the guest (docker info) is what it
// measures next. When none is ready and the last warm boot failed, it
// returns that boot's error at once (the pool keeps retrying, backing off
// from 100 ms to 10 s). Without Warm it boots one now, ctx bounding the
// boot. The episode runs until
// its Close, or the pool's; PoolConfig.Timeout bounds only its boot.
// Its GVX_EPISODE is its ID, numbered per pool.
func (p *Pool) Claim(ctx context.Context) (*Episode, error) {
	t0 := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	if p.cfg.Warm > 0 {
		p.mu.Unlock()
		ep, err := p.claimWarm(ctx, t0)
		if err != nil {
			return nil, err
		}
		ep.setClaim(time.Since(t0), true)
		return ep, nil
	}
	p.warm.boots.Add(1) // Close waits for a boot in progress
	id := p.warm.next
	p.warm.next++
	p.mu.Unlock()
	defer p.warm.boots.Done()
	p.seq.Lock()
	seq := p.next
	p.next++
	p.seq.Unlock()
	ep, err := p.boot(p.ctx, ctx, id, seq, nil)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.teardown(ep)
		return nil, ErrPoolClosed
	}
	p.warm.live[ep] = struct{}{}
	p.mu.Unlock()
	ep.handed.Store(true)
	ep.setClaim(time.Since(t0), false)
	return ep, nil
}

// claimWarm takes the oldest ready warm episode whose guest still runs.
func (p *Pool) claimWarm(ctx context.Context, t0 time.Time) (*Episode, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		w := &p.warm
		if len(w.ready) > 0 {
			ep := w.ready[0]
			w.ready = w.ready[1:]
			p.fillWarmAfter(p.cfg.RefillDelay)
			p.mu.Unlock()
			select {
			case <-ep.done: // it died while it waited
				p.release(ep)
				continue
			default:
			}
			if !ep.handed.CompareAndSwap(false, true) {
				return nil, ErrHandedOut
			}
			ep.setClaim(time.Since(t0), true)
			return ep, nil
		}
		p.fillWarmLocked()
		w.hurryLocked() // a claimer waits: no replacement waits for it
		if p.warmTarget() == 0 && w.booting == 0 {
			err, one := w.err, w.estimate
			p.mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("gvx: no warm episode fits PoolConfig.WarmMemory: %w", err)
			}
			return nil, fmt.Errorf("gvx: no warm episode fits PoolConfig.WarmMemory (%d bytes; one measured %d): raise it, or set Warm 0 to boot cold", p.cfg.WarmMemory, one)
		}
		if w.err != nil { // the last boot failed: say why now, retries go on
			err := w.err
			p.mu.Unlock()
			return nil, fmt.Errorf("gvx: warm episode did not boot: %w", err)
		}
		wake := w.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// setClaim records the handover (Close may be tearing ep down meanwhile).
func (e *Episode) setClaim(d time.Duration, warm bool) {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	e.m.Claim, e.m.Warm = d, warm
}

// kill stops the episode's sandbox (its teardown follows).
func (e *Episode) kill() {
	if e.Sandbox != nil {
		_ = e.Sandbox.Close()
	}
}

// Close tears down an episode from Claim: kills its sandbox, waits for it,
// removes its clone and sockets. It is safe to call more than once, and
// after the pool's Close (which tore it down already). Its error is the
// teardown's; Metrics has the rest.
func (e *Episode) Close() error {
	if e.pool == nil {
		return errors.New("gvx: Episode.Close on an episode no Pool made")
	}
	e.pool.release(e)
	e.mmu.Lock()
	defer e.mmu.Unlock()
	return e.m.Err
}

// Metrics returns what the episode cost so far; complete after Close.
// Metrics.Episode is its ID.
func (e *Episode) Metrics() Metrics {
	e.mmu.Lock() // the pool's Close may be tearing it down
	defer e.mmu.Unlock()
	return e.m
}

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
