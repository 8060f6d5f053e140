package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
)

// WarmSpec asks the server to keep Count episodes of Request booted ahead
// of demand (Config.Warm): cloned, started, the agent answering and, with
// Request.Docker, the Docker daemon answering GET /info through the
// episode's socket. A create whose request is the same as Request (but
// for its TTL and lease) is then a claim: it takes a warm episode at once,
// and the server boots its replacement.
type WarmSpec struct {
	Count   int           `json:"count"`
	Request CreateRequest `json:"request"`
}

// warmSet is one WarmSpec's episodes. Guarded by Server.mu.
type warmSet struct {
	key      string
	req      CreateRequest
	count    int
	ready    []*episode
	booting  int
	failures int // in a row, for the backoff
	lastErr  error
	// hold delays the set's boots until then (Config.RefillDelay).
	hold time.Time
	// estimate is the largest idle memory one of its episodes measured
	// (for Config.WarmMemory; 0: none measured yet).
	estimate int64
}

// warmKey is what a create must match to claim from a warm set: the
// request without its TTL and lease, as canonical JSON.
func warmKey(req CreateRequest) (string, error) {
	req.TTL, req.Lease = 0, 0
	b, err := json.Marshal(req)
	return string(b), err
}

// startWarm checks the warm specs and starts their boots (New).
func (s *Server) startWarm() error {
	s.warm = map[string]*warmSet{}
	if s.cfg.WarmMemory < 0 {
		return errors.New("serve: Config.WarmMemory is negative")
	}
	for i, w := range s.cfg.Warm {
		if w.Count < 0 {
			return fmt.Errorf("serve: Config.Warm[%d]: negative count", i)
		}
		req := w.Request
		if req.Spec != nil {
			req.Spec = req.Spec.Clone()
		}
		if err := s.checkRequest(&req); err != nil {
			return fmt.Errorf("serve: Config.Warm[%d]: %w", i, err)
		}
		key, err := warmKey(req)
		if err != nil {
			return err
		}
		if _, dup := s.warm[key]; dup {
			return fmt.Errorf("serve: Config.Warm[%d]: the same request as an earlier one (give one the sum of the counts)", i)
		}
		s.warm[key] = &warmSet{key: key, req: req, count: w.Count}
	}
	s.fillWarm()
	return nil
}

// fillWarm drops warm episodes that ended while they waited and starts
// boots up to each set's count. The reaper calls it on every tick.
func (s *Server) fillWarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, w := range s.warm {
		w.ready = slices.DeleteFunc(w.ready, func(e *episode) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closing {
				s.metrics.warmReady.Add(-1)
			}
			return e.closing
		})
		if time.Now().Before(w.hold) {
			continue // a claim's replacement waits (Config.RefillDelay)
		}
		for len(w.ready)+w.booting < s.warmTarget(w) {
			w.booting++
			backoff := time.Duration(0)
			if w.failures > 0 {
				backoff = min(100*time.Millisecond<<min(w.failures, 7), 10*time.Second)
			}
			s.warmBoots.Add(1)
			go s.bootWarm(w, backoff)
		}
	}
}

// bootWarm boots one episode of w and puts it on w's ready list.
func (s *Server) bootWarm(w *warmSet, backoff time.Duration) {
	defer s.warmBoots.Done()
	select {
	case <-time.After(backoff):
	case <-s.stop:
	}
	req := w.req
	req.Spec = w.req.Spec.Clone()
	e := s.newEpisode(&req, time.Now())
	e.warm = true
	ctx, cancel := context.WithCancel(context.Background())
	e.cancelStart = cancel
	defer cancel()
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.warming[e] = struct{}{}
	}
	s.mu.Unlock()
	var err error
	if closed {
		err = ErrClosed
	} else if err = s.start(ctx, &req, e); err == nil && req.Docker {
		// Warm means ready for the client: the daemon answers too.
		t := time.Now()
		dctx, dcancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
		err = gvx.WaitDocker(dctx, e.dockerSock, e.runDone)
		dcancel()
		e.ready += time.Since(t)
	}
	if e.unnice != nil {
		// Before anyone can claim it: a claimed episode never runs niced.
		if uerr := e.unnice(); err == nil && uerr != nil {
			err = fmt.Errorf("back to the server's priority: %w", uerr)
		}
	}
	if err == nil {
		e.idleMemory, _ = e.sb.Memory()
	}
	s.mu.Lock()
	delete(s.warming, e)
	w.booting--
	if err == nil && s.cfg.WarmMemory > 0 {
		if err = s.fitWarm(w, e); err != nil {
			// Over the cap: not a failed boot, so no backoff; the set's
			// target has shrunk to what fits.
			s.mu.Unlock()
			s.cfg.Logf("episode %s: not kept warm: %v", e.id, err)
			s.teardown(e, reasonFailed)
			s.fillWarm()
			return
		}
	}
	switch {
	case err == nil && !s.closed:
		w.failures, w.lastErr = 0, nil
		w.ready = append(w.ready, e)
		s.metrics.warmReady.Add(1)
		s.mu.Unlock()
		s.cfg.Logf("episode %s: warm (ready %v, idle memory %d MiB)", e.id, e.ready, e.idleMemory>>20)
		return
	case err != nil && !s.closed:
		w.failures++
		w.lastErr = err
		s.metrics.createFailures.Add(1)
		s.cfg.Logf("episode %s: warm boot failed: %v", e.id, err)
	}
	s.mu.Unlock()
	s.teardown(e, reasonFailed)
	s.fillWarm()
}

// claimWarm takes a warm episode for req, or returns nil if its warm set
// has none ready (or req matches none). The episode is admitted (the cap
// holds) with req's TTL and lease, from now.
func (s *Server) claimWarm(req *CreateRequest, t0 time.Time) (*episode, error) {
	key, err := warmKey(*req)
	if err != nil {
		return nil, nil
	}
	s.mu.Lock()
	w := s.warm[key]
	if w == nil || s.closed {
		s.mu.Unlock()
		return nil, nil
	}
	var e *episode
	for len(w.ready) > 0 && e == nil {
		c := w.ready[0]
		w.ready = w.ready[1:]
		s.metrics.warmReady.Add(-1)
		c.mu.Lock()
		if !c.closing && c.state == StateRunning {
			e = c
		}
		c.mu.Unlock()
	}
	if e == nil {
		w.hold = time.Time{} // demand outran the set: refill now
		s.mu.Unlock()
		go s.fillWarm()
		return nil, nil
	}
	if d := s.cfg.RefillDelay; d > 0 {
		w.hold = time.Now().Add(d) // before a reaper's tick can refill
	}
	s.mu.Unlock()
	ttl, lease := s.ttlLease(req)
	e.mu.Lock()
	e.created, e.expires, e.lease, e.lastSeen = t0, t0.Add(ttl), lease, t0
	e.mu.Unlock()
	if err := s.admit(e); err != nil {
		s.putBackWarm(w, e)
		return nil, err
	}
	if d := s.cfg.RefillDelay; d > 0 {
		time.AfterFunc(d, s.fillWarm)
	} else {
		go s.fillWarm()
	}
	return e, nil
}

// warmTarget is how many episodes w keeps warm now: its count, or fewer
// under Config.WarmMemory: as many as fit beside the other sets' waiting
// and booting episodes, and while w's cost is not known yet, one boot to
// learn it. Call with s.mu.
func (s *Server) warmTarget(w *warmSet) int {
	limit := s.cfg.WarmMemory
	if limit <= 0 {
		return w.count
	}
	if w.estimate == 0 {
		if len(w.ready)+w.booting > 0 {
			return min(w.count, 1)
		}
		return w.count
	}
	for _, o := range s.warm {
		if o != w {
			limit -= o.readyMemory() + int64(o.booting)*o.estimate
		}
	}
	return min(w.count, int(max(limit, 0)/w.estimate))
}

// fitWarm records e's idle memory as w's cost and says whether e fits
// Config.WarmMemory beside the episodes already waiting. Call with s.mu.
func (s *Server) fitWarm(w *warmSet, e *episode) error {
	if e.idleMemory < 0 {
		w.estimate = s.cfg.WarmMemory + 1 // keep none: the cap cannot be kept
		w.lastErr = errors.New("cannot measure a warm episode's memory here (--warm-memory needs Linux's /proc); keeping none warm")
		return w.lastErr
	}
	w.estimate = max(w.estimate, e.idleMemory)
	var sum int64
	for _, o := range s.warm {
		sum += o.readyMemory()
	}
	switch {
	case e.idleMemory > s.cfg.WarmMemory:
		w.lastErr = fmt.Errorf("no warm episode fits --warm-memory %d MiB (one measured %d MiB): raise it, or leave the request cold", s.cfg.WarmMemory>>20, e.idleMemory>>20)
		return w.lastErr
	case sum+e.idleMemory > s.cfg.WarmMemory:
		return fmt.Errorf("its idle memory (%d MiB) would take the warm episodes over --warm-memory (%d MiB; %d MiB waiting)", e.idleMemory>>20, s.cfg.WarmMemory>>20, sum>>20)
	}
	return nil
}

// readyMemory is the idle memory of w's waiting episodes. Call with s.mu.
func (w *warmSet) readyMemory() int64 {
	var sum int64
	for _, e := range w.ready {
		sum += max(e.idleMemory, 0)
	}
	return sum
}

// putBackWarm returns an unclaimed episode to the front of its set.
func (s *Server) putBackWarm(w *warmSet, e *episode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.ready = append([]*episode{e}, w.ready...)
	s.metrics.warmReady.Add(1)
}

// warmMemory is the idle memory of the warm episodes waiting.
func (s *Server) warmMemory() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum int64
	for _, w := range s.warm {
		sum += w.readyMemory()
	}
	return sum
}

// stopWarm (Close) waits for the warm boots and tears down the warm
// episodes left.
func (s *Server) stopWarm() []*episode {
	s.warmBoots.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var left []*episode
	for _, w := range s.warm {
		left = append(left, w.ready...)
		w.ready = nil
	}
	s.metrics.warmReady.Store(0)
	return left
}
