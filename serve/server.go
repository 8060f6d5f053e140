package serve

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/internal/privdir"
	"z.gfire.dev/gvx/pkg/gvx/pool"
	"z.gfire.dev/gvx/reflink"
)

// Server owns the episodes of one node. Its methods are safe for
// concurrent use.
type Server struct {
	cfg     Config
	lock    *os.File // StateDir/lock, flock'd for the server's life
	metrics *metrics

	mu     sync.Mutex
	eps    map[string]*episode
	ended  map[string]string // recently ended episodes: why (bounded)
	order  []string          // ended's keys, oldest first
	closed bool
	// The warm sets (warm.go), by request key, in the warm-pool engine's
	// group (whose Stop cuts the warm boots' start short).
	// pins hands out host CPUs to episodes (Config.PinCPUs); nil: none.
	pins      *cpuPins
	warm      map[string]*warmSet
	warmGroup *pool.Group[*episode]

	stop chan struct{}
	done chan struct{}
}

// maxEnded bounds the ended episodes the server remembers, to tell a late
// client why its episode is gone.
const maxEnded = 1024

// New takes StateDir (refusing one another live server holds), reaps what
// a dead predecessor left there — its episodes' processes, clones and
// sockets — and starts the TTL and lease reaper. Close it to tear every
// episode down.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	lock, err := lockStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lock: lock, metrics: newMetrics(), eps: map[string]*episode{}, ended: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	eps := filepath.Join(cfg.StateDir, epDir)
	if err := privdir.Ensure(eps); err != nil {
		lock.Close()
		return nil, fmt.Errorf("serve: episodes dir: %w; what is in it is trusted: remove it (rungv serve makes it again)", err)
	}
	if s.pins, err = newPins(cfg.PinCPUs); err != nil {
		lock.Close()
		return nil, err
	}
	n, err := reap(eps, rungvPath(cfg.Rungv), cfg.Logf)
	s.metrics.reapedAtStart.Add(int64(n))
	if err != nil {
		lock.Close()
		return nil, err
	}
	if cfg.CloneMode == reflink.Always {
		// At start, not at the first create: a server that answers every
		// golden create with 500 is broken from its first minute.
		if err := reflink.Probe(eps); err != nil && !cfg.RequireReflink {
			s.cfg.CloneMode = reflink.Auto
			cfg.Logf("warning: state dir %s cannot clone golden volumes by reflink (%v): each golden volume will be copied (time and disk in proportion to its data); put --state-dir on the golden volumes' XFS or Btrfs filesystem to clone them in O(1), or pass --clone auto to say copying is intended", cfg.StateDir, err)
		} else if err != nil {
			lock.Close()
			return nil, fmt.Errorf("serve: state dir %s cannot clone golden volumes by reflink (--clone always, RequireReflink): %w; put --state-dir on the golden volumes' XFS or Btrfs filesystem, or pass --clone auto (CloneMode reflink.Auto) to copy each one instead", cfg.StateDir, err)
		}
	}
	if err := s.startWarm(); err != nil {
		lock.Close()
		return nil, err
	}
	go s.reaper()
	return s, nil
}

// lockStateDir flocks StateDir/lock, so one server at a time owns the
// directory (and may reap it).
func lockStateDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("serve: state dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("serve: %s is held by another live rungv serve: stop it, or give this one another --state-dir", name)
		}
		return nil, fmt.Errorf("serve: lock %s: %w", name, err)
	}
	return f, nil
}

// rungvPath is the rungv binary episodes run, as package gvx finds it
// ("" if none is found): the reaper kills only processes running it (or
// the binary their record names).
func rungvPath(explicit string) string {
	for _, p := range []string{explicit, os.Getenv("GVX_RUNGV")} {
		if p != "" {
			return p
		}
	}
	p, _ := exec.LookPath("rungv")
	return p
}

// Cap is the most episodes the server runs at once.
func (s *Server) Cap() int { return s.cfg.MaxEpisodes }

// admit takes a slot for e, or refuses.
func (s *Server) admit(e *episode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if len(s.eps) >= s.cfg.MaxEpisodes {
		s.metrics.rejected.Add(1)
		return fmt.Errorf("%w: %d episodes live, the server's --max-episodes; retry after %v or close one", ErrCapacity, len(s.eps), s.cfg.RetryAfter)
	}
	s.eps[e.id] = e
	s.metrics.live.Store(int64(len(s.eps)))
	return nil
}

// forget drops a torn-down episode.
func (s *Server) forget(e *episode, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eps[e.id] == e {
		delete(s.eps, e.id)
	}
	s.metrics.live.Store(int64(len(s.eps)))
	if len(s.order) >= maxEnded {
		delete(s.ended, s.order[0])
		s.order = s.order[1:]
	}
	s.ended[e.id] = reason
	s.order = append(s.order, e.id)
}

// get finds a running episode.
func (s *Server) get(id string) (*episode, error) {
	s.mu.Lock()
	e, ok := s.eps[id]
	why := s.ended[id]
	s.mu.Unlock()
	if !ok {
		if why != "" {
			return nil, fmt.Errorf("%w: %s was torn down (%s)", ErrNotFound, id, why)
		}
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	e.mu.Lock()
	state := e.state
	e.mu.Unlock()
	if state != StateRunning {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotRunning, id, state)
	}
	return e, nil
}

// Get describes the episode id.
func (s *Server) Get(id string) (EpisodeInfo, error) {
	s.mu.Lock()
	e, ok := s.eps[id]
	s.mu.Unlock()
	if !ok {
		_, err := s.get(id)
		return EpisodeInfo{}, err
	}
	return e.info(), nil
}

// List describes every live episode, oldest first.
func (s *Server) List() []EpisodeInfo {
	s.mu.Lock()
	eps := make([]*episode, 0, len(s.eps))
	for _, e := range s.eps {
		eps = append(eps, e)
	}
	s.mu.Unlock()
	out := make([]EpisodeInfo, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.info())
	}
	slices.SortFunc(out, func(a, b EpisodeInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Renew renews the episode's lease.
func (s *Server) Renew(id string) (EpisodeInfo, error) {
	e, err := s.get(id)
	if err != nil {
		return EpisodeInfo{}, err
	}
	e.touch()()
	return e.info(), nil
}

// Delete tears the episode down and waits until it is gone.
func (s *Server) Delete(id string) error {
	s.mu.Lock()
	e, ok := s.eps[id]
	s.mu.Unlock()
	if !ok {
		_, err := s.get(id)
		return err
	}
	s.teardown(e, reasonClose)
	return nil
}

// Close refuses new episodes, tears every live one down and releases the
// state directory.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	eps := make([]*episode, 0, len(s.eps))
	for _, e := range s.eps {
		eps = append(eps, e)
	}
	s.mu.Unlock()
	s.warmGroup.Stop()
	close(s.stop)
	<-s.done
	eps = append(eps, s.warmGroup.Wait()...)
	var wg sync.WaitGroup
	for _, e := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.teardown(e, reasonShutdown)
		}()
	}
	wg.Wait()
	return s.lock.Close()
}

// reapInterval is how often TTLs and leases are checked.
const reapInterval = 250 * time.Millisecond

// reaper tears down episodes whose TTL or lease ran out.
func (s *Server) reaper() {
	defer close(s.done)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			var due []*episode
			var why []string
			for _, e := range s.eps {
				if r := e.expired(now); r != "" {
					due, why = append(due, e), append(why, r)
				}
			}
			s.mu.Unlock()
			for i, e := range due {
				s.cfg.Logf("episode %s: %s ran out", e.id, why[i])
				go s.teardown(e, why[i])
			}
		}
	}
}
