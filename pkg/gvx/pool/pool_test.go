package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx/pool"
)

// item is a fake episode: booting it takes nothing, it "ends" when its
// done is closed.
type item struct {
	id        int
	memory    int64
	done      chan struct{}
	discarded atomic.Int32
	why       error
}

// fakes counts boots and discards and lets a test hold boots back.
type fakes struct {
	mu        sync.Mutex
	next      int
	booted    []*item
	discarded []*item
	memory    int64 // every new item's
	fail      error // every boot's error, while set
	gate      chan struct{}
	started   chan *item // each boot, once it is called (if set)
	urgents   []<-chan struct{}
}

func (f *fakes) ops() pool.Ops[*item] {
	return pool.Ops[*item]{
		Boot: func(ctx context.Context, urgent <-chan struct{}) (*item, error) {
			f.mu.Lock()
			gate, fail, started := f.gate, f.fail, f.started
			f.urgents = append(f.urgents, urgent)
			it := &item{id: f.next, memory: f.memory, done: make(chan struct{})}
			f.next++
			f.mu.Unlock()
			if started != nil {
				started <- it
			}
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if fail != nil {
				return nil, fail
			}
			f.mu.Lock()
			f.booted = append(f.booted, it)
			f.mu.Unlock()
			return it, nil
		},
		Memory: func(it *item) int64 { return it.memory },
		Done:   func(it *item) <-chan struct{} { return it.done },
		Discard: func(it *item, why error) {
			if it.discarded.Add(1) != 1 {
				panic("discarded twice")
			}
			f.mu.Lock()
			it.why = why
			f.discarded = append(f.discarded, it)
			f.mu.Unlock()
		},
	}
}

func waitReady(t *testing.T, s *pool.Set[*item]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v (%+v)", err, s.Stats())
	}
}

// TestClaimExclusive: 64 claimers race for the items of a Set of 4 (and
// their replacements): no item is handed over twice, every one handed
// over was booted and never discarded, and Stop/Wait returns exactly the
// ready ones left.
func TestClaimExclusive(t *testing.T) {
	f := &fakes{}
	g := pool.NewGroup[*item](0)
	s := g.Add(pool.Config{Count: 4}, f.ops())
	waitReady(t, s)
	var mu sync.Mutex
	got := map[*item]int{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 64 {
		wg.Go(func() {
			var it *item
			var err error
			if i%2 == 0 {
				it, err = s.Claim(ctx)
			} else {
				var ok bool
				if it, ok = s.TryClaim(); !ok {
					return
				}
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[it]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for it, n := range got {
		if n != 1 || it.discarded.Load() != 0 {
			t.Errorf("item %d handed over %d times, discarded %d", it.id, n, it.discarded.Load())
		}
	}
	if len(got) < 32 {
		t.Errorf("%d claims served, want at least the 32 that wait", len(got))
	}
	waitReady(t, s)
	g.Stop()
	left := g.Wait()
	if len(left) != 4 {
		t.Errorf("Wait returned %d ready items, want 4", len(left))
	}
	for _, it := range left {
		if got[it] != 0 {
			t.Errorf("item %d both claimed and left ready", it.id)
		}
	}
	if _, err := s.Claim(ctx); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Claim after Stop: %v", err)
	}
	if _, ok := s.TryClaim(); ok {
		t.Error("TryClaim after Stop handed an item over")
	}
}

// TestMemoryCap: two Sets share a cap of 2.5 items' memory: the Group
// never holds more ready than fit (2 in all), a Set whose one item is over
// the cap keeps none and Claim says why, and an item the Group cannot
// measure leaves its Set with none.
func TestMemoryCap(t *testing.T) {
	const one = 100 << 20
	f1, f2 := &fakes{memory: one}, &fakes{memory: one}
	g := pool.NewGroup[*item](one * 5 / 2)
	a := g.Add(pool.Config{Count: 3}, f1.ops())
	b := g.Add(pool.Config{Count: 3}, f2.ops())
	waitReady(t, a)
	waitReady(t, b)
	if m := g.ReadyMemory(); m > one*5/2 || g.Ready() != 2 {
		t.Errorf("ready %d holding %d bytes, cap %d", g.Ready(), m, one*5/2)
	}
	if sa, sb := a.Stats(), b.Stats(); sa.Ready+sa.Booting+sb.Ready+sb.Booting != 2 || sa.MaxMemory != one {
		t.Errorf("sets: %+v %+v", sa, sb)
	}
	g.Stop()
	g.Wait()

	big := &fakes{memory: 3 * one}
	g = pool.NewGroup[*item](one)
	s := g.Add(pool.Config{Count: 2}, big.ops())
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var me *pool.MemoryError
	if _, err := s.Claim(ctx); !errors.Is(err, pool.ErrNoneFits) || !errors.As(err, &me) || !me.Alone() {
		t.Errorf("Claim from a Set none fits: %v", err)
	}
	if st := s.Stats(); st.Target != 0 || st.Ready != 0 {
		t.Errorf("a Set none fits: %+v", st)
	}
	g.Stop()
	g.Wait()
	// The discard runs after the Set says why (outside the Group's lock):
	// counted once Wait has returned.
	if len(big.discarded) != 1 {
		t.Errorf("a Set none fits: %d discarded, want 1", len(big.discarded))
	}

	blind := &fakes{memory: -1}
	g = pool.NewGroup[*item](one)
	s = g.Add(pool.Config{Count: 2}, blind.ops())
	waitReady(t, s)
	if _, err := s.Claim(ctx); !errors.Is(err, pool.ErrUnmeasured) {
		t.Errorf("Claim from a Set that cannot be measured: %v", err)
	}
	g.Stop()
	g.Wait()
}

// TestRefillDelay: a claimed item's replacement does not boot while its
// RefillDelay (an hour here) runs; a TryClaim that finds the Set empty
// ends the wait (the replacement boots) but not the low priority, and a
// Claim that waits ends that too.
func TestRefillDelay(t *testing.T) {
	f := &fakes{}
	g := pool.NewGroup[*item](0)
	defer func() { g.Stop(); g.Wait() }()
	s := g.Add(pool.Config{Count: 1, RefillDelay: time.Hour}, f.ops())
	waitReady(t, s)
	started := make(chan *item, 4)
	f.mu.Lock()
	f.started, f.gate = started, make(chan struct{})
	f.mu.Unlock()
	if _, ok := s.TryClaim(); !ok {
		t.Fatal("no warm item")
	}
	select {
	case it := <-started:
		t.Fatalf("item %d boots during the refill delay", it.id)
	default:
	}
	if st := s.Stats(); st.Booting != 1 || st.Ready != 0 {
		t.Errorf("after a claim: %+v (want its replacement waiting)", st)
	}
	if _, ok := s.TryClaim(); ok {
		t.Fatal("a second item from a Set of one")
	}
	<-started // the empty Set's TryClaim ended the delay
	f.mu.Lock()
	urgent := f.urgents[len(f.urgents)-1]
	f.mu.Unlock()
	select {
	case <-urgent:
		t.Error("TryClaim ended the boot's low priority: nobody waits for it")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claimed := make(chan error, 1)
	go func() { _, err := s.Claim(ctx); claimed <- err }()
	select {
	case <-urgent: // the waiting Claim made it urgent
	case <-ctx.Done():
		t.Fatal("a waiting Claim did not end the boot's low priority")
	}
	close(f.gate)
	if err := <-claimed; err != nil {
		t.Error(err)
	}
}

// TestPutBack: an item put back (its claimer could not use it) is the
// next one handed over, and the replacement still waiting its refill
// delay is dropped rather than booted beside it; after Stop, PutBack
// refuses it.
func TestPutBack(t *testing.T) {
	f := &fakes{}
	g := pool.NewGroup[*item](0)
	s := g.Add(pool.Config{Count: 1, RefillDelay: time.Hour}, f.ops())
	waitReady(t, s)
	it, ok := s.TryClaim()
	if !ok {
		t.Fatal("no warm item")
	}
	if !s.PutBack(it) {
		t.Fatal("PutBack refused")
	}
	again, ok := s.TryClaim()
	if !ok || again != it {
		t.Fatalf("after PutBack: %v %v, want item %d", again, ok, it.id)
	}
	s.PutBack(again)
	g.Stop()
	left := g.Wait()
	f.mu.Lock()
	booted := len(f.booted)
	f.mu.Unlock()
	if len(left) != 1 || left[0] != it || booted != 1 {
		t.Errorf("left %v, %d booted: the replacement booted beside the item put back", left, booted)
	}
	if s.PutBack(it) {
		t.Error("PutBack after Stop kept the item")
	}
}

// TestExitedWhileReady: a ready item that ends while it waits leaves the
// list (discarded with ErrExited, never handed over) and is replaced.
func TestExitedWhileReady(t *testing.T) {
	f := &fakes{}
	g := pool.NewGroup[*item](0)
	defer func() { g.Stop(); g.Wait() }()
	s := g.Add(pool.Config{Count: 1}, f.ops())
	waitReady(t, s)
	f.mu.Lock()
	dead := f.booted[0]
	f.mu.Unlock()
	close(dead.done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it, err := s.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if it == dead {
		t.Fatal("handed over an item that had ended")
	}
	g.Stop()
	g.Wait()
	if dead.discarded.Load() != 1 || !errors.Is(dead.why, pool.ErrExited) {
		t.Errorf("the ended item: discarded %d, why %v", dead.discarded.Load(), dead.why)
	}
}

// TestBootFails: Claim and Wait return the failed boot's error at once
// instead of waiting for an item that never comes; Stop then ends the
// retries (Wait returns).
func TestBootFails(t *testing.T) {
	boom := errors.New("no such image")
	f := &fakes{fail: boom}
	g := pool.NewGroup[*item](0)
	s := g.Add(pool.Config{Count: 1}, f.ops())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var be *pool.BootError
	if err := s.Wait(ctx); !errors.As(err, &be) || !errors.Is(err, boom) {
		t.Errorf("Wait: %v", err)
	}
	if _, err := s.Claim(ctx); !errors.Is(err, boom) {
		t.Errorf("Claim: %v", err)
	}
	if st := s.Stats(); !errors.Is(st.Err, boom) {
		t.Errorf("Stats: %+v", st)
	}
	g.Stop()
	if left := g.Wait(); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
}
