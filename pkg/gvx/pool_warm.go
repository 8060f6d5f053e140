package gvx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"z.gfire.dev/gvx/pkg/gvx/pool"
)

// The warm pool (PoolConfig.Warm): episodes booted ahead of demand, kept
// by the warm-pool engine (package pool) in a Set of the Pool's own; the
// Pool boots, measures and tears down its episodes for it.
//
// An episode is in exactly one of: booting, ready (on the Set's list),
// handed out (its handed flag set, by the one claimer the engine gave it
// to), or torn down. The engine's handover under its lock is what makes a
// handover exclusive; the flag is the check that it stayed so.
type warmState struct {
	group *pool.Group[*Episode]
	set   *pool.Set[*Episode] // nil without Warm

	// Guarded by Pool.mu.
	//
	// live is every episode the pool started for Claim and the warm
	// list, not yet torn down: what Close must tear down.
	live map[*Episode]struct{}
	// starting are the episodes of boots whose rungv has started.
	starting map[*Episode]struct{}
	next     int            // the next warm or claimed episode's ID
	boots    sync.WaitGroup // cold Claims' boots
}

// init makes the warm pool of p (NewPool); it boots nothing yet.
func (w *warmState) init(p *Pool) {
	w.live = map[*Episode]struct{}{}
	w.starting = map[*Episode]struct{}{}
	if p.cfg.Warm == 0 {
		return
	}
	w.group = pool.NewGroup[*Episode](p.cfg.WarmMemory)
	w.set = w.group.Add(pool.Config{Count: p.cfg.Warm, RefillDelay: p.cfg.RefillDelay}, pool.Ops[*Episode]{
		Boot:    p.bootWarm,
		Memory:  func(ep *Episode) int64 { return ep.Metrics().IdleMemory },
		Done:    (*Episode).Done,
		Discard: func(ep *Episode, _ error) { p.release(ep) },
	})
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
	// Err is the last warm boot's error, if it failed, or why no warm
	// episode fits WarmMemory.
	Err error
}

// WarmStats returns what the warm pool holds now.
func (p *Pool) WarmStats() WarmStats {
	if p.warm.set == nil {
		return WarmStats{}
	}
	st := p.warm.set.Stats()
	return WarmStats{Ready: st.Ready, Booting: st.Booting, Target: st.Target,
		ReadyMemory: st.ReadyMemory, MaxEpisodeMemory: st.MaxMemory, Err: st.Err}
}

// WaitWarm waits until the warm pool holds its target of ready episodes
// (WarmStats.Target), or fails with the last warm boot's error once a boot
// failed and none is ready or booting.
func (p *Pool) WaitWarm(ctx context.Context) error {
	if p.warm.set == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return ErrPoolClosed
		}
		return nil
	}
	return p.warmErr(p.warm.set.Wait(ctx))
}

// warmErr is the engine's error in the pool's words.
func (p *Pool) warmErr(err error) error {
	var boot *pool.BootError
	var mem *pool.MemoryError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pool.ErrClosed):
		return ErrPoolClosed
	case errors.As(err, &mem):
		return fmt.Errorf("gvx: no warm episode fits PoolConfig.WarmMemory (%d bytes; one measured %d): raise it, or set Warm 0 to boot cold", mem.Cap, mem.Measured)
	case errors.Is(err, pool.ErrNoneFits):
		st := p.warm.set.Stats()
		if errors.Is(err, pool.ErrUnmeasured) {
			return errors.New("gvx: no warm episode fits PoolConfig.WarmMemory: cannot measure a warm episode's memory here (PoolConfig.WarmMemory needs Linux's /proc and a Ready); keeping none warm")
		}
		return fmt.Errorf("gvx: no warm episode fits PoolConfig.WarmMemory (%d bytes; one measured %d): raise it, or set Warm 0 to boot cold", p.cfg.WarmMemory, st.MaxMemory)
	case errors.As(err, &boot):
		return fmt.Errorf("gvx: warm episode did not boot: %w", boot.Err)
	}
	return err
}

// fillWarm starts warm boots up to the target.
func (p *Pool) fillWarm() {
	if p.warm.set != nil {
		p.warm.set.Fill()
	}
}

// bootWarm boots one warm episode for the engine, at RefillNice until
// urgent is closed or its Ready passes. Its sandbox runs under the pool's
// context, not the engine's: Close lets boots under way finish before it
// kills them (letStartersSettle).
func (p *Pool) bootWarm(_ context.Context, urgent <-chan struct{}) (*Episode, error) {
	p.mu.Lock()
	id := p.warm.next
	p.warm.next++
	p.mu.Unlock()
	p.seq.Lock()
	seq := p.next
	p.next++
	p.seq.Unlock()
	ctx, cancel := p.ctx, context.CancelFunc(func() {})
	if p.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
	}
	defer cancel()
	if err := p.ctx.Err(); err != nil {
		return nil, err
	}
	ep, err := p.boot(p.ctx, ctx, id, seq, &warmBoot{urgent: urgent})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.warm.live[ep] = struct{}{}
	p.mu.Unlock()
	return ep, nil
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
	if p.warm.group != nil {
		p.warm.group.Wait() // the ready ones left are in live
	}
	p.warm.boots.Wait()
	p.mu.Lock()
	left := make([]*Episode, 0, len(p.warm.live))
	for ep := range p.warm.live {
		left = append(left, ep)
	}
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
		return p.claimWarm(ctx, t0)
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
	ep, err := p.warm.set.Claim(ctx)
	if err != nil {
		return nil, p.warmErr(err)
	}
	if !ep.handed.CompareAndSwap(false, true) {
		return nil, ErrHandedOut
	}
	ep.setClaim(time.Since(t0), true)
	return ep, nil
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
