package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/pkg/gvx/pool"
	"z.gfire.dev/gvx/spec"
)

// WarmSpec asks the server to keep Count episodes of Request booted ahead
// of demand (Config.Warm): cloned, started, the agent answering and, with
// Request.Docker, the Docker daemon answering GET /info through the
// episode's socket. A create whose request boots the same episode as
// Request (it may differ in TTL, lease and defaults spelled out: see
// warmKey) is then a claim: it takes a warm episode at once, and the
// server boots its replacement.
type WarmSpec struct {
	Count   int           `json:"count"`
	Request CreateRequest `json:"request"`
}

// warmSet is one WarmSpec's episodes: a Set of the server's warm-pool
// engine (package pool), which fills it, delays refills, keeps
// Config.WarmMemory across every set and hands each episode over once;
// the server boots, measures and tears down its episodes.
type warmSet struct {
	key string
	req CreateRequest
	set *pool.Set[*episode]
}

// warmKey is what a create must match to claim from a warm set: what
// changes the booted episode, as canonical JSON: the spec as the server
// boots it (Version and the default memory limit filled in, an empty
// entrypoint the same as none), the golden volume and where it is
// mounted, Docker and its port (defaults filled in, dropped without a
// golden or Docker), Forkable. TTL and Lease are left out: a claim gives
// the episode its own request's, from the claim on; so is everything a
// client sends with each exec (its env, workdir). req has passed
// checkRequest.
func (s *Server) warmKey(req CreateRequest) (string, error) {
	// When the create answers changes nothing booted: a warm episode is
	// claimed ready (its daemon answering, with docker).
	req.TTL, req.Lease, req.Wait = 0, 0, ""
	if req.Spec != nil {
		sp := req.Spec.Clone()
		if sp.Version == 0 {
			sp.Version = spec.Version
		}
		if len(sp.Entrypoint) == 0 {
			sp.Entrypoint = nil
		}
		s.defaultLimits(&sp.Limits)
		req.Spec = sp
	}
	switch {
	case req.Golden == "":
		req.GoldenTarget = ""
	case req.GoldenTarget == "":
		req.GoldenTarget = DefaultGoldenTarget
	}
	if req.Golden != "" {
		req.Golden, req.GoldenTarget = filepath.Clean(req.Golden), path.Clean(req.GoldenTarget)
	}
	if req.GoldenDurability == spec.DurabilityEpisode {
		req.GoldenDurability = "" // the default (goldenDurability)
	}
	switch {
	case !req.Docker:
		req.DockerPort = 0
	case req.DockerPort == 0:
		req.DockerPort = DefaultDockerPort
	}
	b, err := json.Marshal(req)
	return string(b), err
}

// startWarm checks the warm specs and starts their boots (New).
func (s *Server) startWarm() error {
	s.warm = map[string]*warmSet{}
	if s.cfg.WarmMemory < 0 {
		return errors.New("serve: Config.WarmMemory is negative")
	}
	s.warmGroup = pool.NewGroup[*episode](s.cfg.WarmMemory)
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
		key, err := s.warmKey(req)
		if err != nil {
			return err
		}
		if _, dup := s.warm[key]; dup {
			return fmt.Errorf("serve: Config.Warm[%d]: the same request as an earlier one (give one the sum of the counts)", i)
		}
		ws := &warmSet{key: key, req: req}
		ws.set = s.warmGroup.Add(pool.Config{Count: w.Count, RefillDelay: s.cfg.RefillDelay}, pool.Ops[*episode]{
			Boot:    func(ctx context.Context, _ <-chan struct{}) (*episode, error) { return s.bootWarm(ctx, ws) },
			Memory:  func(e *episode) int64 { return e.idleMemory },
			Done:    func(e *episode) <-chan struct{} { return e.runDone },
			Discard: s.discardWarm,
		})
		s.warm[key] = ws
	}
	s.warmGroup.Fill()
	return nil
}

// bootWarm boots one episode of w for the engine: ready for the client,
// and back at the server's priority (a claimed episode never runs
// niced). ctx ends when the server closes. A create never waits for a
// warm boot (it boots its own), so the boot stays niced until it is
// ready or its second is up (gvx.Sandbox.BootNiced).
func (s *Server) bootWarm(ctx context.Context, w *warmSet) (*episode, error) {
	req := w.req
	req.Spec = w.req.Spec.Clone()
	e := s.newEpisode(&req, time.Now())
	e.warm = true
	ctx, e.cancelStart = context.WithCancel(ctx)
	defer e.cancelStart()
	err := s.start(ctx, &req, e)
	if err == nil && req.Docker {
		// Warm means ready for the client: the daemon answers too.
		t := time.Now()
		dctx, dcancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
		err = gvx.WaitDocker(dctx, e.dockerSock, e.runDone)
		dcancel()
		e.ready += time.Since(t)
	}
	if e.unnice != nil {
		// Before the engine can hand it over: a claimed episode never runs niced.
		if uerr := e.unnice(); err == nil && uerr != nil {
			err = fmt.Errorf("back to the server's priority: %w", uerr)
		}
	}
	if err != nil {
		if ctx.Err() == nil { // not the server closing
			s.metrics.createFailures.Add(1)
			s.cfg.Logf("episode %s: warm boot failed: %v", e.id, err)
		}
		s.teardown(e, reasonFailed)
		return nil, err
	}
	e.idleMemory, _ = e.sb.Memory()
	s.cfg.Logf("episode %s: warm (ready %v, idle memory %d MiB)", e.id, e.ready, e.idleMemory>>20)
	return e, nil
}

// discardWarm tears down a warm episode the engine will not hand over,
// and says why.
func (s *Server) discardWarm(e *episode, why error) {
	var mem *pool.MemoryError
	switch {
	case errors.Is(why, pool.ErrClosed):
		s.teardown(e, reasonShutdown)
		return
	case errors.Is(why, pool.ErrExited):
		s.teardown(e, reasonExited) // its run has begun the same
		return
	case errors.Is(why, pool.ErrUnmeasured):
		why = errors.New("cannot measure a warm episode's memory here (--warm-memory needs Linux's /proc); keeping none warm")
	case errors.As(why, &mem) && mem.Alone():
		why = fmt.Errorf("no warm episode fits --warm-memory %d MiB (one measured %d MiB): raise it, or leave the request cold", mem.Cap>>20, mem.Measured>>20)
	case errors.As(why, &mem):
		why = fmt.Errorf("its idle memory (%d MiB) would take the warm episodes over --warm-memory (%d MiB; %d MiB waiting)", mem.Measured>>20, mem.Cap>>20, mem.Waiting>>20)
	}
	s.cfg.Logf("episode %s: not kept warm: %v", e.id, why)
	s.teardown(e, reasonFailed)
}

// claimWarm takes a warm episode for req, or returns nil if its warm set
// has none ready (or req matches none): the create then boots its own,
// and the set's refill starts at once. The episode is admitted (the cap
// holds) with req's TTL and lease, from now.
func (s *Server) claimWarm(req *CreateRequest, t0 time.Time) (*episode, error) {
	key, err := s.warmKey(*req)
	if err != nil {
		return nil, nil
	}
	w := s.warm[key] // written only by New
	if w == nil {
		return nil, nil
	}
	e, ok := w.set.TryClaim()
	if !ok {
		return nil, nil
	}
	ttl, lease := s.ttlLease(req)
	e.mu.Lock()
	e.created, e.expires, e.lease, e.lastSeen = t0, t0.Add(ttl), lease, t0
	e.mu.Unlock()
	if err := s.admit(e); err != nil {
		if !w.set.PutBack(e) {
			go s.teardown(e, reasonShutdown) // the server closed meanwhile
		}
		return nil, err
	}
	return e, nil
}

// warmReady is how many warm episodes wait for a claim.
func (s *Server) warmReady() int64 { return int64(s.warmGroup.Ready()) }

// warmMemory is the idle memory of the warm episodes waiting.
func (s *Server) warmMemory() int64 { return s.warmGroup.ReadyMemory() }
