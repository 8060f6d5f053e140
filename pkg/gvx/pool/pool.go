package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors of the engine. A discarded item's reason (Ops.Discard) is one of
// ErrClosed, ErrExited, ErrSurplus, ErrUnmeasured or a *MemoryError.
var (
	// ErrClosed: the Group was stopped.
	ErrClosed = errors.New("pool: stopped")
	// ErrExited: a ready item's Done closed while it waited for a claim.
	ErrExited = errors.New("pool: a warm item ended while it waited")
	// ErrSurplus: a boot ended with its Set already holding its target
	// ready (an item was put back meanwhile).
	ErrSurplus = errors.New("pool: more warm items than the target")
	// ErrUnmeasured: the Group has a memory cap and an item's memory could
	// not be measured (Ops.Memory returned a negative value); its Set then
	// keeps none.
	ErrUnmeasured = errors.New("cannot measure a warm episode's memory here (a memory cap needs Linux's /proc and a readiness check); keeping none warm")
	// ErrNoneFits: Claim on a Set of which no item fits the memory cap (its
	// target is 0 and nothing boots). Set.Stats says what was measured.
	ErrNoneFits = errors.New("pool: no warm item fits the memory cap")
)

// MemoryError is why a booted item was not kept: its idle memory
// (Measured) beside the ready items' (Waiting) is over the Group's Cap,
// all in bytes.
type MemoryError struct {
	Measured, Waiting, Cap int64
}

func (e *MemoryError) Error() string {
	if e.Alone() {
		return fmt.Sprintf("one warm episode's idle memory (%d MiB) is over the cap (%d MiB)", e.Measured>>20, e.Cap>>20)
	}
	return fmt.Sprintf("its idle memory (%d MiB) would take the warm episodes over the cap (%d MiB; %d MiB waiting)", e.Measured>>20, e.Cap>>20, e.Waiting>>20)
}

// Alone says the item is over the cap by itself: its Set keeps none.
func (e *MemoryError) Alone() bool { return e.Measured > e.Cap }

// BootError is Claim's and Wait's error when the Set's last boot failed
// and none is ready; the engine goes on retrying.
type BootError struct{ Err error }

func (e *BootError) Error() string { return "warm boot failed: " + e.Err.Error() }
func (e *BootError) Unwrap() error { return e.Err }

// Ops are what the engine does with a Set's items (T: a pointer type).
type Ops[T comparable] struct {
	// Boot boots one item and returns it ready, or an error (having
	// cleaned up whatever it made). ctx ends at Group.Stop; urgent is
	// closed when a claimer waits for this boot (run it at full priority
	// from then on).
	Boot func(ctx context.Context, urgent <-chan struct{}) (T, error)
	// Memory is a ready item's idle memory in bytes as Boot measured it,
	// negative if it could not. Nil: none is measured (no memory cap can
	// be kept). It is called with the Group's lock held: it must only
	// read what Boot recorded.
	Memory func(T) int64
	// Done is closed when the item ended by itself (nil: never watched).
	Done func(T) <-chan struct{}
	// Discard tears down an item the engine booted and will not hand
	// over; why says so (see the errors above).
	Discard func(item T, why error)
}

// DefaultRefillDelay is about what a burst of docker info claims at 8 on
// 2 CPUs takes (docs/runtime.md, "Warm pools"): a replacement's boot is
// ~2 s of CPU, so the wait costs its refill ~10 %. gvx.PoolConfig and
// serve.Config default to it.
const DefaultRefillDelay = 250 * time.Millisecond

// Config is one Set's.
type Config struct {
	// Count is how many items the Set keeps ready or booting (fewer under
	// the Group's memory cap).
	Count int
	// RefillDelay is how long a claimed item's replacement waits before it
	// boots (0: none).
	RefillDelay time.Duration
}

// Stats is a snapshot of a Set.
type Stats struct {
	// Ready are the items waiting for a claim, Booting those being booted
	// (or waiting their backoff or refill delay) to join them.
	Ready, Booting int
	// Target is how many the Set keeps now: Count, or fewer under the cap.
	Target int
	// ReadyMemory is the Ready items' idle memory together, MaxMemory the
	// largest one measured (bytes; 0 when none was).
	ReadyMemory, MaxMemory int64
	// Err is why the last boot failed, or why none fits the cap (nil
	// after a boot succeeds).
	Err error
}

// Group is Sets that share one memory cap and one lock.
type Group[T comparable] struct {
	memory int64 // the cap on the ready items' idle memory (0: none)
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	sets   []*Set[T]
	closed bool
	boots  sync.WaitGroup // boots and discards under way
}

// Set is one kind of item kept warm.
type Set[T comparable] struct {
	g   *Group[T]
	cfg Config
	ops Ops[T]

	// Guarded by g.mu.
	ready    []entry[T]
	booting  int
	estimate int64 // the largest idle memory measured
	failures int   // boots failed in a row, for the backoff
	err      error
	// wake is closed (and replaced) whenever the Set changes, for
	// claimers and Wait.
	wake chan struct{}
	// hurry is closed to end the refill delay of the boots waiting it;
	// urgent to end the low priority of the boots in flight. Nil when no
	// boot has it.
	hurry, urgent chan struct{}
}

type entry[T comparable] struct {
	item   T
	memory int64
}

// NewGroup returns a Group whose Sets' ready items may hold at most
// memory bytes of idle memory together (0: no cap).
func NewGroup[T comparable](memory int64) *Group[T] {
	g := &Group[T]{memory: max(memory, 0)}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Add adds a Set; it boots nothing until Fill.
func (g *Group[T]) Add(cfg Config, ops Ops[T]) *Set[T] {
	s := &Set[T]{g: g, cfg: cfg, ops: ops, wake: make(chan struct{})}
	s.cfg.Count = max(s.cfg.Count, 0)
	g.mu.Lock()
	g.sets = append(g.sets, s)
	g.mu.Unlock()
	return s
}

// Fill starts boots up to every Set's target.
func (g *Group[T]) Fill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fillLocked()
}

func (g *Group[T]) fillLocked() {
	for _, s := range g.sets {
		s.fillLocked(0)
	}
}

// Fill starts boots up to the Set's target (and the other Sets').
func (s *Set[T]) Fill() { s.g.Fill() }

// ReadyMemory is the idle memory of every ready item of the Group.
func (g *Group[T]) ReadyMemory() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readyMemoryLocked()
}

func (g *Group[T]) readyMemoryLocked() int64 {
	var sum int64
	for _, s := range g.sets {
		sum += s.readyMemory()
	}
	return sum
}

// Ready is how many items of the Group wait for a claim.
func (g *Group[T]) Ready() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, s := range g.sets {
		n += len(s.ready)
	}
	return n
}

func (s *Set[T]) readyMemory() int64 {
	var sum int64
	for _, e := range s.ready {
		sum += max(e.memory, 0)
	}
	return sum
}

// changed wakes the Set's waiters. Call with g.mu.
func (s *Set[T]) changed() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// target is how many items s keeps now: Count, or fewer under the cap:
// as many as fit beside the other Sets' ready and booting items, and
// while s's cost is not known, one boot to learn it. Call with g.mu.
func (s *Set[T]) target() int {
	limit := s.g.memory
	if limit <= 0 {
		return s.cfg.Count
	}
	if s.estimate == 0 {
		if len(s.ready)+s.booting > 0 {
			return min(s.cfg.Count, 1)
		}
		return s.cfg.Count
	}
	for _, o := range s.g.sets {
		if o != s {
			limit -= o.readyMemory() + int64(o.booting)*o.estimate
		}
	}
	return min(s.cfg.Count, int(max(limit, 0)/s.estimate))
}

// fillLocked starts boots up to the target, each after delay (a claim's
// replacement) unless hurried. Call with g.mu.
func (s *Set[T]) fillLocked(delay time.Duration) {
	for !s.g.closed && len(s.ready)+s.booting < s.target() {
		s.booting++
		s.g.boots.Add(1)
		backoff := time.Duration(0)
		if s.failures > 0 {
			backoff = min(100*time.Millisecond<<min(s.failures, 7), 10*time.Second)
		}
		var hurry chan struct{}
		if delay > 0 {
			if s.hurry == nil {
				s.hurry = make(chan struct{})
			}
			hurry = s.hurry
		}
		if s.urgent == nil {
			s.urgent = make(chan struct{})
		}
		go s.boot(backoff, delay, hurry, s.urgent)
	}
}

// hurryLocked ends the refill delay of the boots waiting it and, when
// urgent (a claimer waits for them), the low priority of those in flight.
// Call with g.mu.
func (s *Set[T]) hurryLocked(urgent bool) {
	if s.hurry != nil {
		close(s.hurry)
		s.hurry = nil
	}
	if urgent && s.urgent != nil {
		close(s.urgent)
		s.urgent = nil
	}
}

// boot boots one item after backoff and then delay (which hurry ends
// early), and puts it on the ready list, or discards it.
func (s *Set[T]) boot(backoff, delay time.Duration, hurry, urgent <-chan struct{}) {
	g := s.g
	defer g.boots.Done()
	if backoff > 0 {
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-g.ctx.Done():
		}
		t.Stop()
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-hurry:
		case <-g.ctx.Done():
		}
		t.Stop()
	}
	g.mu.Lock()
	if g.closed || len(s.ready)+s.booting > s.target() {
		// Stopped, or no longer wanted (a PutBack, a smaller target).
		s.booting--
		s.changed()
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()

	item, err := s.ops.Boot(g.ctx, urgent)
	memory := int64(-1)
	if err == nil && s.ops.Memory != nil {
		memory = s.ops.Memory(item)
	}

	g.mu.Lock()
	s.booting--
	s.changed()
	if err != nil {
		if !g.closed {
			s.failures++
			s.err = err
			g.fillLocked()
		}
		g.mu.Unlock()
		return
	}
	why := error(nil)
	switch {
	case g.closed:
		why = ErrClosed
	case len(s.ready) >= s.target():
		why = ErrSurplus
	}
	if why == nil {
		s.failures, s.err = 0, nil
		s.estimate = max(s.estimate, memory)
		why = s.fitLocked(memory)
	}
	if why != nil {
		g.boots.Add(1) // the discard below, for Wait
		g.fillLocked()
		g.mu.Unlock()
		s.discard(item, why)
		return
	}
	s.ready = append(s.ready, entry[T]{item, memory})
	if s.ops.Done != nil {
		go s.watch(item)
	}
	g.fillLocked()
	g.mu.Unlock()
}

// fitLocked says why an item that measured memory may not join the ready
// ones under the cap, or nil. Call with g.mu.
func (s *Set[T]) fitLocked(memory int64) error {
	g := s.g
	if g.memory <= 0 {
		return nil
	}
	if memory < 0 {
		s.estimate = g.memory + 1 // keep none: the cap cannot be kept
		s.err = ErrUnmeasured
		return s.err
	}
	e := &MemoryError{Measured: memory, Waiting: g.readyMemoryLocked(), Cap: g.memory}
	switch {
	case e.Alone():
		s.err = e // its target is 0 now: say why
		return e
	case e.Waiting+memory > g.memory:
		return e // its target shrinks to what fits
	}
	return nil
}

// discard tears item down (counted in boots by the caller).
func (s *Set[T]) discard(item T, why error) {
	defer s.g.boots.Done()
	if s.ops.Discard != nil {
		s.ops.Discard(item, why)
	}
}

// watch takes a ready item that ends while it waits off the list.
func (s *Set[T]) watch(item T) {
	g := s.g
	select {
	case <-s.ops.Done(item):
	case <-g.ctx.Done():
		return // Wait hands it to the caller
	}
	g.mu.Lock()
	i := slices.IndexFunc(s.ready, func(e entry[T]) bool { return e.item == item })
	if i < 0 || g.closed {
		g.mu.Unlock()
		return // claimed, or Wait hands it over
	}
	s.ready = slices.Delete(s.ready, i, i+1)
	g.boots.Add(1)
	s.changed()
	g.fillLocked()
	g.mu.Unlock()
	s.discard(item, ErrExited)
}

// take hands over the oldest ready item, if any, starting its replacement
// after RefillDelay. Call with g.mu.
func (s *Set[T]) take() (T, bool) {
	var zero T
	if len(s.ready) == 0 {
		return zero, false
	}
	item := s.ready[0].item
	s.ready = slices.Delete(s.ready, 0, 1)
	s.changed()
	s.fillLocked(s.cfg.RefillDelay)
	return item, true
}

// alive says whether item is still running (its Done is open).
func (s *Set[T]) alive(item T) bool {
	if s.ops.Done == nil {
		return true
	}
	select {
	case <-s.ops.Done(item):
		return false
	default:
		return true
	}
}

// dropDead discards an item taken from the list that had ended.
func (s *Set[T]) dropDead(item T) {
	s.g.mu.Lock()
	s.g.boots.Add(1)
	s.g.mu.Unlock()
	s.discard(item, ErrExited)
}

// TryClaim hands over the oldest ready item, and the Set boots its
// replacement after RefillDelay. With none ready it returns false at once
// and ends the refill delay of the Set's boots (demand outran the Set);
// their priority stays low: the caller does not wait for them.
func (s *Set[T]) TryClaim() (T, bool) {
	var zero T
	for {
		s.g.mu.Lock()
		if s.g.closed {
			s.g.mu.Unlock()
			return zero, false
		}
		item, ok := s.take()
		if !ok {
			s.hurryLocked(false)
			s.fillLocked(0)
			s.g.mu.Unlock()
			return zero, false
		}
		s.g.mu.Unlock()
		if s.alive(item) {
			return item, true
		}
		s.dropDead(item)
	}
}

// Claim hands over the oldest ready item, waiting for one if none is, and
// the Set boots its replacement after RefillDelay. While it waits the
// Set's boots run without delay and at full priority. It fails with
// ErrClosed, ErrNoneFits, a *BootError when the last boot failed and none
// is ready (the Set goes on retrying), or ctx's error.
func (s *Set[T]) Claim(ctx context.Context) (T, error) {
	var zero T
	for {
		s.g.mu.Lock()
		if s.g.closed {
			s.g.mu.Unlock()
			return zero, ErrClosed
		}
		if item, ok := s.take(); ok {
			s.g.mu.Unlock()
			if s.alive(item) {
				return item, nil
			}
			s.dropDead(item)
			continue
		}
		s.fillLocked(0)
		s.hurryLocked(true)
		if s.target() == 0 && s.booting == 0 {
			err := s.err
			s.g.mu.Unlock()
			if err != nil {
				return zero, fmt.Errorf("%w: %w", ErrNoneFits, err)
			}
			return zero, ErrNoneFits
		}
		if s.err != nil {
			err := s.err
			s.g.mu.Unlock()
			return zero, &BootError{Err: err}
		}
		wake := s.wake
		s.g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// PutBack returns an item TryClaim or Claim handed over, unused, to the
// front of the list; its replacement, if still waiting its refill delay,
// is dropped as surplus when the wait ends. It returns false, and keeps
// nothing, once the Group is stopped: the caller tears the item down.
func (s *Set[T]) PutBack(item T) bool {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.g.closed {
		return false
	}
	memory := int64(-1)
	if s.ops.Memory != nil {
		memory = s.ops.Memory(item)
	}
	// Its watch (boot) still runs: it ends with the item or the Group.
	s.ready = slices.Insert(s.ready, 0, entry[T]{item, memory})
	s.changed()
	return true
}

// Wait waits until the Set holds its target of ready items and none
// boots, or fails: ErrClosed, a *BootError once a boot failed and none is
// ready (it does not wait for the retries), or ctx's error.
func (s *Set[T]) Wait(ctx context.Context) error {
	s.Fill()
	for {
		s.g.mu.Lock()
		if s.g.closed {
			s.g.mu.Unlock()
			return ErrClosed
		}
		if len(s.ready) >= s.target() && s.booting == 0 {
			s.g.mu.Unlock()
			return nil
		}
		if s.err != nil && len(s.ready) == 0 {
			err := s.err
			s.g.mu.Unlock()
			return &BootError{Err: err}
		}
		wake := s.wake
		s.g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stats returns what the Set holds now.
func (s *Set[T]) Stats() Stats {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	return Stats{Ready: len(s.ready), Booting: s.booting, Target: s.target(),
		ReadyMemory: s.readyMemory(), MaxMemory: s.estimate, Err: s.err}
}

// Stop refuses claims and boots from now on, wakes every waiter, and
// cancels the ctx of the boots under way.
func (g *Group[T]) Stop() {
	g.mu.Lock()
	g.closed = true
	for _, s := range g.sets {
		s.changed()
	}
	g.mu.Unlock()
	g.cancel()
}

// Wait (after Stop) waits for every boot and discard under way and
// returns the ready items left, which the caller tears down.
func (g *Group[T]) Wait() []T {
	g.boots.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	var left []T
	for _, s := range g.sets {
		for _, e := range s.ready {
			left = append(left, e.item)
		}
		s.ready = nil
	}
	return left
}
