package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// maxForkChildren bounds one fork's N (the episode cap bounds it too).
const maxForkChildren = 64

// Fork makes req.N episodes that continue from the running forkable
// episode id (CreateRequest.Forkable): gvx.Sandbox.Fork saves it, paused,
// clones its volumes at that instant, and it goes on; each child is
// restored from that checkpoint on its own clones, with its own agent and
// Docker sockets, and is running when Fork returns. An episode is forked
// at most once (fork a child for a later state). The children count
// against MaxEpisodes. A request to the episode in flight while it is
// saved (an exec streaming, say) makes the save fail: gVisor cannot save
// a connection being served.
func (s *Server) Fork(ctx context.Context, id string, req ForkRequest) ([]EpisodeInfo, error) {
	if req.N < 1 || req.N > maxForkChildren || req.TTL < 0 {
		return nil, fmt.Errorf("%w: fork: n must be 1..%d and ttl not negative", ErrBadRequest, maxForkChildren)
	}
	p, err := s.get(id)
	if err != nil {
		return nil, err
	}
	done := p.touch()
	defer done()
	p.mu.Lock()
	sb := p.sb
	var refused error
	switch {
	case !p.forkable:
		refused = &kindError{ErrNotForkable, fmt.Sprintf("episode %s is not forkable: create it with \"forkable\": true (forkable=True in Python)", id)}
	case p.forked:
		refused = &kindError{ErrNotForkable, fmt.Sprintf("episode %s is not forkable: it was forked already (an episode forks once: fork one of its children, made with \"forkable\": true, for a later state)", id)}
	case p.state != StateRunning:
		refused = &kindError{ErrNotRunning, fmt.Sprintf("episode %s is %s: fork it while it runs", id, p.state)}
	default:
		p.forked = true
	}
	p.mu.Unlock()
	if refused != nil {
		return nil, refused
	}

	t0 := time.Now()
	kids := make([]*episode, req.N)
	kctx := make([]context.Context, req.N) // each child's start; a teardown cancels it
	for i := range kids {
		creq := CreateRequest{Spec: &spec.Spec{Image: p.image}, Docker: p.dockerSock != "", TTL: req.TTL, Lease: req.Lease}
		k := s.newEpisode(&creq, t0)
		k.parent = p.id
		if p.service != nil {
			k.service = &ServiceInfo{Argv: p.service.Argv, State: ServiceStarting}
		}
		kctx[i], k.cancelStart = context.WithCancel(ctx)
		defer k.cancelStart()
		if err := s.admit(k); err != nil {
			for _, k := range kids[:i] {
				s.teardown(k, reasonFailed)
			}
			return nil, err
		}
		kids[i] = k
	}
	fail := func(err error) ([]EpisodeInfo, error) {
		for _, k := range kids {
			s.teardown(k, reasonFailed)
		}
		s.metrics.createFailures.Add(1)
		return nil, err
	}
	// The server's own idle connections to the agent are host sockets
	// the guest's relay holds: gVisor cannot save those.
	p.agent.CloseIdleConnections()
	_, cp, err := sb.Fork(ctx, 0, nil)
	if err != nil {
		if errors.Is(err, gvx.ErrNotSaved) {
			// Nothing was saved and the parent runs on unchanged: it
			// stays forkable, and the caller may try again.
			p.mu.Lock()
			p.forked = false
			p.mu.Unlock()
			return fail(&kindError{ErrNotForkable, fmt.Sprintf("fork %s: %v (the episode runs on unchanged and may be forked again)", id, err)})
		}
		return fail(fmt.Errorf("fork %s: %w", id, err))
	}
	errs := make([]error, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids {
		wg.Go(func() { errs[i] = s.startChild(kctx[i], cp, p, k, req.Forkable) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(fmt.Errorf("fork %s: %w", id, err))
	}
	infos := make([]EpisodeInfo, len(kids))
	for i, k := range kids {
		s.metrics.created.Add(1)
		s.metrics.create.observe(time.Since(t0))
		infos[i] = k.info()
	}
	s.cfg.Logf("episode %s: forked into %d in %v", id, len(kids), time.Since(t0))
	return infos, nil
}

// startChild restores k, a child of p, from cp and waits for its agent.
func (s *Server) startChild(ctx context.Context, cp *gvx.Checkpoint, p, k *episode, forkable bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	rec, err := makeEpisodeDir(k)
	if err != nil {
		return err
	}
	// One path per volume mount of the checkpoint, in order: the clone of
	// the golden as the parent had it (volume.ext4), others numbered.
	var vols []string
	for j, m := range cp.Spec.Mounts {
		if m.Type != spec.MountVolume {
			continue
		}
		name := "volume-" + strconv.Itoa(j) + ".ext4"
		if p.vol != "" && m.Target == p.volTarget {
			name = volumeFile
			k.vol = filepath.Join(k.dir, name)
		}
		vols = append(vols, filepath.Join(k.dir, name))
	}
	ports := []gvx.Port{{HostSocket: filepath.Join(k.dir, agentSock)}}
	if k.dockerSock != "" {
		ports = append(ports, gvx.Port{HostSocket: k.dockerSock})
	}
	t := time.Now()
	sb, err := cp.Restore(ctx, vols, gvx.Config{Rungv: s.cfg.Rungv, HostCPUs: s.pin(k), Stdout: k.output, Stderr: k.output, Ports: ports})
	if err != nil {
		return err
	}
	k.reset = time.Since(t)
	k.cloneMethod = p.cloneMethod
	if forkable {
		if err := sb.EnableCheckpoint(filepath.Join(k.dir, checkpointDir)); err != nil {
			return err
		}
		k.forkable = true
	}
	k.volTarget = p.volTarget
	return s.launch(ctx, k, sb, rec)
}
