package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// Files of an episode's directory, StateDir/ep/ID.
const (
	epDir         = "ep"
	recordFile    = "record.json"
	volumeFile    = "volume.ext4"
	agentSock     = "agent.sock"
	checkpointDir = "checkpoint" // a forkable episode's (fork.go)
	dockerSock    = "docker.sock"
	outputLimit   = 64 << 10 // the episode's output kept, for errors
)

// Teardown reasons (the reason label of gvx_serve_teardowns_total).
const (
	reasonClose    = "close"
	reasonTTL      = "ttl"
	reasonLease    = "lease"
	reasonExited   = "exited"
	reasonFailed   = "failed"
	reasonShutdown = "shutdown"
)

// episode is one live episode. Its mutable fields are guarded by mu.
type episode struct {
	id, dir, image  string
	vol, dockerSock string
	agent           *http.Client // to the agent, over agent.sock
	created         time.Time
	expires         time.Time
	lease           time.Duration
	cloneMethod     string
	reset, ready    time.Duration
	output          *tail
	// warm episodes were booted ahead of demand (WarmSpec); claim is
	// their create's latency, idleMemory what they held once ready.
	warm       bool
	claim      time.Duration
	idleMemory int64
	// forkable episodes were started with a checkpoint directory
	// (CreateRequest.Forkable); forked is set by their one fork; parent
	// names the episode a fork child continues (fork.go).
	forkable, forked bool
	parent           string
	volTarget        string // where vol is mounted in the guest
	// waitDocker: the create answers once Docker answers too
	// (CreateRequest.Wait).
	waitDocker bool

	mu    sync.Mutex
	state string
	// service is the service's state (nil: the episode has none);
	// dockerReady says Docker answered (waitDocker).
	service     *ServiceInfo
	dockerReady bool
	sb          *gvx.Sandbox
	lastSeen    time.Time
	inflight    int
	runErr      error
	exitCode    int
	runDone     chan struct{} // closed when the sandbox's Run returned
	hostCPU     int           // the host CPU its sandbox was put on (Config.PinCPUs: pin, move); -1: all
	// unnice puts a warm boot's processes back at the server's priority
	// (Config.RefillNice); nil: not niced.
	unnice  func() error
	gone    chan struct{} // closed when the teardown is complete
	closing bool
	// abandon is set when a teardown is asked for while the episode
	// starts: Create then fails and tears it down itself; cancelStart
	// hurries it.
	abandon     bool
	cancelStart context.CancelFunc
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// info describes the episode.
func (e *episode) info() EpisodeInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := EpisodeInfo{ID: e.id, State: e.state, Image: e.image, DockerSocket: e.dockerSock, Volume: e.vol,
		CloneMethod: e.cloneMethod, Created: e.created, ExpiresAt: e.expires, LeaseSeconds: e.lease.Seconds(),
		ResetSeconds: e.reset.Seconds(), ReadySeconds: e.ready.Seconds(),
		Warm: e.warm, ClaimSeconds: e.claim.Seconds(), IdleMemoryBytes: max(e.idleMemory, 0),
		Forkable: e.forkable && !e.forked, Parent: e.parent}
	if sv := e.service; sv != nil {
		c := *sv
		if sv.ExitCode != nil {
			code := *sv.ExitCode
			c.ExitCode = &code
		}
		in.Service = &c
	}
	if e.lease > 0 && e.inflight == 0 {
		in.LeaseExpiresAt = e.lastSeen.Add(e.lease)
	}
	return in
}

// touch marks a request for the episode as begun; the returned func marks
// it ended. Both renew the lease.
func (e *episode) touch() (done func()) {
	e.mu.Lock()
	e.inflight++
	e.lastSeen = time.Now()
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.inflight--
		e.lastSeen = time.Now()
		e.mu.Unlock()
	}
}

// expired says why the episode should be torn down now, or "".
func (e *episode) expired(now time.Time) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.state != StateRunning:
		return ""
	case !now.Before(e.expires):
		return reasonTTL
	case e.lease > 0 && e.inflight == 0 && now.Sub(e.lastSeen) >= e.lease:
		return reasonLease
	}
	return ""
}

// episodeSpec is the spec the server runs for req: the agent as the
// command, with the request's entrypoint and args as its service; the
// clone and the sockets added.
func (s *Server) episodeSpec(req *CreateRequest, e *episode) (*spec.Spec, error) {
	sp := req.Spec.Clone()
	service := append(append([]string{}, sp.Entrypoint...), sp.Args...)
	sp.Entrypoint, sp.Args = agent.Command(s.cfg.AgentPort, service), nil
	if sp.Privileged {
		// What dockerd needs in the Sentry, as rungv run adds it, and
		// --tls=false unless its environment sets TLS up: the agent
		// decides in the guest, where the image's environment is.
		sp.Entrypoint = agent.DaemonCommand(s.cfg.AgentPort, service)
	}
	if e.vol != "" {
		target := req.GoldenTarget
		if target == "" {
			target = DefaultGoldenTarget
		}
		sp.Mounts = append(sp.Mounts, spec.Mount{Type: spec.MountVolume, Source: e.vol, Target: target, Durability: goldenDurability(req)})
		e.volTarget = target
	}
	sp.Ports = append(sp.Ports, spec.Port{HostSocket: filepath.Join(e.dir, agentSock), GuestPort: s.cfg.AgentPort})
	s.defaultLimits(&sp.Limits)
	if req.Docker {
		port := req.DockerPort
		if port == 0 {
			port = DefaultDockerPort
		}
		sp.Ports = append(sp.Ports, spec.Port{HostSocket: e.dockerSock, GuestPort: port})
	}
	if err := sp.Validate(); err != nil {
		return nil, fmt.Errorf("%w: spec: %w", ErrBadRequest, err)
	}
	return sp, nil
}

// defaultLimits gives limits without a memory limit the server's
// (Config.DefaultMemory). Where a limit could not be enforced by a host
// cgroup (rootless: a cgroup may still be delegated, which the runtime
// finds out), a create that chose no policy and no CPUs has it
// best-effort: the guest then sees the default (the Sentry's shaping, no
// host bound) rather than every such create being refused. As root the
// policy stays the create's (strict): best-effort there would also let
// an episode run with no pids limit where no pids cgroup can be made.
// goldenDurability is the durability of req's golden clone: "episode"
// unless the request asks for "full". The clone is this episode's alone
// and deleted at its close; no one reads it after a host crash, so a
// guest fsync need not wait for the host's disk (4–9 ms each on a loaded
// VM, against 0.24–1.1 ms: docs/runtime.md, "What a guest fsync costs").
// A checkpoint or fork copies the clone durably itself.
func goldenDurability(req *CreateRequest) spec.Durability {
	if req.GoldenDurability == "" {
		return spec.DurabilityEpisode
	}
	return req.GoldenDurability
}

func (s *Server) defaultLimits(l *spec.Limits) {
	if l.MemoryBytes != 0 || s.cfg.DefaultMemory <= 0 {
		return
	}
	l.MemoryBytes = s.cfg.DefaultMemory
	if l.Policy == "" && l.CPUs == 0 && os.Geteuid() != 0 {
		l.Policy = spec.LimitsBestEffort
	}
}

// checkRequest validates what can be validated before a slot is taken.
func (s *Server) checkRequest(req *CreateRequest) error {
	if req.Spec == nil {
		return fmt.Errorf("%w: no spec (want {\"spec\": {\"image\": …}})", ErrBadRequest)
	}
	if req.Spec.Version == 0 {
		req.Spec.Version = spec.Version
	}
	if err := req.Spec.Validate(); err != nil {
		return fmt.Errorf("%w: spec: %w", ErrBadRequest, err)
	}
	if req.Forkable {
		if req.Spec.Isolation == spec.IsolationNamespaces {
			return fmt.Errorf("%w: a forkable episode runs in isolation %s (checkpoints need it), not %s", ErrBadRequest, spec.IsolationSeccompOnly, req.Spec.Isolation)
		}
		if len(req.Spec.Ports) > 0 {
			return fmt.Errorf("%w: a forkable episode publishes only the agent's and Docker's sockets (its children get their own): drop spec.ports", ErrBadRequest)
		}
	}
	if err := checkWait(req); err != nil {
		return err
	}
	if req.TTL < 0 || req.DockerPort < 0 || req.DockerPort > 65535 {
		return fmt.Errorf("%w: negative ttl or bad docker_port", ErrBadRequest)
	}
	switch req.GoldenDurability {
	case "", spec.DurabilityFull, spec.DurabilityEpisode:
	default:
		return fmt.Errorf("%w: golden_durability %q: want episode (the default) or full", ErrBadRequest, req.GoldenDurability)
	}
	if req.GoldenDurability != "" && req.Golden == "" {
		return fmt.Errorf("%w: golden_durability is for the clone of a golden: set golden", ErrBadRequest)
	}
	if req.Golden != "" {
		if !filepath.IsAbs(req.Golden) {
			return fmt.Errorf("%w: golden %q is not an absolute host path", ErrBadRequest, req.Golden)
		}
		st, err := os.Stat(req.Golden)
		if err != nil {
			return fmt.Errorf("%w: golden volume: %w", ErrBadRequest, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%w: golden volume %s is not a regular file", ErrBadRequest, req.Golden)
		}
	}
	return nil
}

// Create starts an episode and waits until its agent answers. ctx bounds
// the start (a client that goes away while waiting abandons it: it is torn
// down). Errors: ErrBadRequest, ErrCapacity, ErrClosed, or why the episode
// did not start (with the tail of its output).
func (s *Server) Create(ctx context.Context, req CreateRequest) (EpisodeInfo, error) {
	t0 := time.Now()
	if err := s.checkRequest(&req); err != nil {
		return EpisodeInfo{}, err
	}
	if e, err := s.claimWarm(&req, t0); err != nil || e != nil {
		if err != nil {
			return EpisodeInfo{}, err
		}
		e.claim = time.Since(t0)
		s.metrics.created.Add(1)
		s.metrics.warmClaims.Add(1)
		s.metrics.claim.observe(e.claim)
		s.metrics.create.observe(e.claim)
		s.cfg.Logf("episode %s: claimed warm in %v", e.id, e.claim)
		return e.info(), nil
	}
	e := s.newEpisode(&req, t0)
	ctx, e.cancelStart = context.WithCancel(ctx)
	defer e.cancelStart()
	if err := s.admit(e); err != nil {
		return EpisodeInfo{}, err
	}
	if err := s.start(ctx, &req, e); err != nil {
		s.metrics.createFailures.Add(1)
		s.teardown(e, reasonFailed)
		s.cfg.Logf("episode %s: create failed: %v", e.id, err)
		return EpisodeInfo{}, err
	}
	s.metrics.created.Add(1)
	s.metrics.create.observe(time.Since(t0))
	s.cfg.Logf("episode %s: running (reset %v, ready %v)", e.id, e.reset, e.ready)
	return e.info(), nil
}

// ttlLease is the TTL and lease req asks for, within the server's bounds.
func (s *Server) ttlLease(req *CreateRequest) (ttl, lease time.Duration) {
	ttl = s.cfg.DefaultTTL
	if req.TTL > 0 {
		ttl = min(time.Duration(req.TTL*float64(time.Second)), s.cfg.MaxTTL)
	}
	lease = s.cfg.DefaultLease
	switch {
	case req.Lease > 0:
		lease = time.Duration(req.Lease * float64(time.Second))
	case req.Lease < 0:
		lease = 0
	}
	return ttl, max(lease, 0)
}

// newEpisode is a new starting episode for req, created at t0.
func (s *Server) newEpisode(req *CreateRequest, t0 time.Time) *episode {
	ttl, lease := s.ttlLease(req)
	id := newID()
	dir := filepath.Join(s.cfg.StateDir, epDir, id)
	e := &episode{id: id, dir: dir, image: req.Spec.Image, created: t0, expires: t0.Add(ttl), lease: lease,
		output: &tail{limit: outputLimit}, state: StateStarting, lastSeen: t0, exitCode: -1,
		runDone: make(chan struct{}), gone: make(chan struct{}), idleMemory: -1, hostCPU: -1}
	if req.Docker {
		e.dockerSock = filepath.Join(dir, dockerSock)
	}
	if argv := serviceArgv(req); len(argv) > 0 {
		e.service = &ServiceInfo{Argv: argv, State: ServiceStarting}
	}
	e.waitDocker = waitsForDocker(req)
	return e
}

// start clones, starts the sandbox and waits for the agent.
func (s *Server) start(ctx context.Context, req *CreateRequest, e *episode) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	rec, err := makeEpisodeDir(e)
	if err != nil {
		return err
	}
	if req.Golden != "" {
		e.vol = filepath.Join(e.dir, volumeFile)
		t := time.Now()
		res, err := reflink.CloneFile(req.Golden, e.vol, reflink.Options{Mode: s.cfg.CloneMode, NoSync: true})
		e.reset = time.Since(t)
		if err != nil {
			return fmt.Errorf("clone golden volume %s: %w (the state dir must be on the golden's filesystem for a reflink; rungv serve --clone auto copies instead)", req.Golden, err)
		}
		e.cloneMethod = res.Method.String()
		s.metrics.reset.observe(e.reset)
	}
	sp, err := s.episodeSpec(req, e)
	if err != nil {
		return err
	}
	sb, err := gvx.NewFromSpec(ctx, sp, gvx.Config{Rungv: s.cfg.Rungv, HostCPUs: s.pin(e), Stdout: e.output, Stderr: e.output})
	if err != nil {
		return err
	}
	if req.Forkable {
		if err := sb.EnableCheckpoint(filepath.Join(e.dir, checkpointDir)); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		e.forkable = true
	}
	if e.warm && s.cfg.RefillNice > 0 {
		e.unnice = sb.BootNiced(s.cfg.RefillNice, e.runDone)
	}
	return s.launch(ctx, e, sb, rec)
}

// makeEpisodeDir makes e's directory (new, in the private StateDir/ep)
// and its first record (the rungv process is added once it runs).
func makeEpisodeDir(e *episode) (*record, error) {
	if err := os.Mkdir(e.dir, 0o700); err != nil {
		return nil, fmt.Errorf("episode dir: %w", err)
	}
	rec := &record{ID: e.id, ServerPID: os.Getpid(), Created: e.created}
	if err := writeRecord(e.dir, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// launch runs sb, e's sandbox, and waits until its agent answers.
func (s *Server) launch(ctx context.Context, e *episode, sb *gvx.Sandbox, rec *record) error {
	t := time.Now()
	e.mu.Lock()
	e.sb = sb
	e.mu.Unlock()
	go s.run(e, sb)
	// The record names the rungv process once it exists, for a successor
	// that must reap it.
	for sb.Pid() == 0 {
		select {
		case <-e.runDone:
			return e.startError("exited before it started")
		case <-time.After(time.Millisecond):
		}
	}
	rec.RungvPID = sb.Pid()
	rec.RungvStart = procStart(rec.RungvPID)
	s.move(e) // pinned while it started (Config.PinCPUs)
	noteExe(rec)
	if err := writeRecord(e.dir, rec); err != nil {
		return err
	}
	ac := agentClient(filepath.Join(e.dir, agentSock))
	e.mu.Lock()
	e.agent = ac
	e.mu.Unlock()
	if err := waitAgent(ctx, e); err != nil {
		return err
	}
	if err := s.waitService(ctx, e); err != nil {
		return err
	}
	e.ready = time.Since(t)
	s.metrics.ready.observe(e.ready)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.abandon {
		return fmt.Errorf("%w: closed while starting", ErrNotRunning)
	}
	e.state, e.lastSeen = StateRunning, time.Now()
	return nil
}

// run runs the sandbox to its end; an episode that ends by itself is torn
// down.
func (s *Server) run(e *episode, sb *gvx.Sandbox) {
	code, err := sb.Run(context.Background())
	e.mu.Lock()
	e.exitCode, e.runErr = code, err
	closing := e.closing || e.state == StateStarting
	e.mu.Unlock()
	close(e.runDone)
	if !closing {
		// The output is the guest's: quoted, it stays on this one line and
		// cannot drive the reader's terminal.
		s.cfg.Logf("episode %s: exited by itself (status %d, %v), its output ends: %q", e.id, code, err, e.output.String())
		s.teardown(e, reasonExited)
	}
}

// startError says why the episode did not start.
func (e *episode) startError(what string) error {
	e.mu.Lock()
	code, err := e.exitCode, e.runErr
	e.mu.Unlock()
	msg := fmt.Sprintf("episode %s", what)
	if err != nil {
		msg += ": " + err.Error()
	} else if code >= 0 {
		msg += fmt.Sprintf(" (status %d)", code)
	}
	if out := strings.TrimSpace(e.output.String()); out != "" && !strings.Contains(msg, out) {
		msg += "; its output ends: " + strconv.Quote(out) // the guest's: one line, no escapes
	}
	if err != nil && imageMissing(err.Error()) {
		// rungv's own words (its error pipe, not the guest's output).
		if !strings.Contains(msg, "gvx-vol image ls") {
			msg += " (`gvx-vol image ls` lists the images in the cache; `gvx-vol image add SOURCE` adds one)"
		}
		return &kindError{ErrImageNotFound, fmt.Sprintf("image %q not found: %s", e.image, msg)}
	}
	return errors.New(msg)
}

// imageMissing says whether rungv's error says the episode's image is
// neither where its reference points nor in the cache (package image's
// ErrNotFound and ErrNotCached, as rungv run words them).
func imageMissing(msg string) bool {
	return strings.Contains(msg, "image: not found") || strings.Contains(msg, "is not in the image cache")
}

// waitAgent polls the agent's health until it answers, the episode exits
// or ctx is done.
func waitAgent(ctx context.Context, e *episode) error {
	for delay := 2 * time.Millisecond; ; delay = min(delay*2, 20*time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
		resp, err := e.agent.Do(req)
		if err == nil {
			drainClose(resp.Body)
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.runDone:
			return e.startError("exited before its agent answered")
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return e.startError("did not answer in time (rungv serve --ready-timeout)")
			}
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// agentClient talks HTTP to the agent over its published socket.
func agentClient(sock string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10, // the agent is as hostile as the guest
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        30 * time.Second,
	}}
}

// teardown kills the episode, removes its directory (clone, sockets,
// record) and forgets it. It runs once; later calls wait for the first.
func (s *Server) teardown(e *episode, reason string) {
	e.mu.Lock()
	if e.state == StateStarting && reason != reasonFailed {
		// Create owns a starting episode: it fails and tears it down.
		e.abandon = true
		e.mu.Unlock()
		e.cancelStart()
		<-e.gone
		return
	}
	if e.closing {
		e.mu.Unlock()
		<-e.gone
		return
	}
	e.closing, e.state = true, StateClosing
	sb := e.sb
	e.mu.Unlock()
	t := time.Now()
	if sb != nil {
		_ = sb.Close()
		<-e.runDone
	}
	s.unpin(e) // its sandbox has ended (or never began)
	if e.agent != nil {
		e.agent.CloseIdleConnections()
	}
	if err := os.RemoveAll(e.dir); err != nil {
		s.cfg.Logf("episode %s: remove %s: %v", e.id, e.dir, err)
	}
	s.metrics.teardown.observe(time.Since(t))
	s.metrics.teardowns.inc(reason)
	s.forget(e, reason)
	close(e.gone)
	s.cfg.Logf("episode %s: torn down (%s) in %v", e.id, reason, time.Since(t))
}

// tail keeps the last limit bytes written to it, and lets readers follow
// what comes after (since).
type tail struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	total int64         // bytes ever written; buf holds the last len(buf) of them
	more  chan struct{} // closed (and replaced) by the next write; nil: none asked
}

// Write keeps at least the last limit bytes written, in at most twice
// that: the buffer is cut back to limit only once it doubles, so a guest
// that writes its output a byte at a time costs the server O(1) per byte
// (cutting back on every write moved 64 KiB per byte).
func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(b))
	if t.more != nil {
		close(t.more)
		t.more = nil
	}
	if len(b) >= t.limit {
		t.buf = append(t.buf[:0], b[len(b)-t.limit:]...)
		return len(b), nil
	}
	if len(t.buf)+len(b) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-(t.limit-len(b)):]...)
	}
	t.buf = append(t.buf, b...)
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	const show = 2 << 10
	b := t.buf
	if len(b) > show {
		b = b[len(b)-show:]
	}
	return string(b)
}

// since returns a copy of what was written from offset off on (off < 0:
// the last limit bytes kept), at most most bytes of it (from its start),
// the offset after it, how many bytes before it are lost (written, but no
// longer kept) and a channel closed by the next write.
func (t *tail) since(off int64, most int) (b []byte, next, lost int64, more <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := t.total - int64(len(t.buf)) // the offset of buf[0]
	if off < 0 {
		off = max(t.total-int64(t.limit), first)
	}
	if off < first {
		lost, off = first-off, first
	}
	b = t.buf[off-first:]
	if len(b) > most {
		b = b[:most]
	}
	if t.more == nil {
		t.more = make(chan struct{})
	}
	return append([]byte(nil), b...), off + int64(len(b)), lost, t.more
}
