package gvx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// DefaultVolumePath is where a Pool mounts each episode's clone of the
// golden volume unless PoolConfig.GuestPath says otherwise.
const DefaultVolumePath = "/var/lib/docker"

// PoolConfig describes a pool of episodes that all start from one golden
// volume file.
type PoolConfig struct {
	// Golden is the golden ext4 volume file. It is only ever read: each
	// episode mounts its own clone.
	Golden string
	// ScratchDir holds the clones (ep-<pid>-<n>.ext4). It must be on the
	// golden's filesystem for a reflink clone; it is created if missing.
	// NewPool removes clones left there by pools whose process is gone.
	ScratchDir string
	// GuestPath is where the clone is mounted; "" means DefaultVolumePath.
	GuestPath string
	// Parallel is how many episodes run at once; 0 means 1.
	Parallel int
	// Base is every episode's Config. The pool adds the clone's volume
	// mount and GVX_EPISODE=<n> to Envv. Stdin must be nil (episodes get
	// /dev/null); Stdout and Stderr, if set, receive every episode's output
	// (writes serialized), which is also kept per episode (Episode.Stdout).
	Base Config
	// Spec, when set, is every episode's whole spec in place of Base's
	// episode fields (Base then sets only Rungv, Stdout and Stderr): for
	// the options Config does not have, as rungv pool's flags give them.
	// The pool adds the clone's mount and GVX_EPISODE as with Base.
	Spec *spec.Spec
	// Timeout bounds each episode from its clone to its teardown; 0 means
	// no limit beyond Run's context.
	Timeout time.Duration
	// Ready, when set, is called once the sandbox has started; the episode
	// function runs only after it returns nil. A typical Ready polls the
	// guest's daemon, or waits for a line the guest prints
	// (Episode.WaitOutput).
	Ready func(ctx context.Context, ep *Episode) error
	// CloneMode is reflink's mode: Always (the zero value) refuses to copy
	// where it cannot clone; Auto falls back to a sparse copy.
	CloneMode reflink.Mode
	// OutputLimit caps the output kept per episode and stream; 0 means
	// 1 MiB. Output beyond it is dropped from the kept copy only.
	OutputLimit int
	// Sockets publishes guest TCP ports of every episode as unix sockets
	// of its own: name → guest port (e.g. "docker": 2375). Each episode's
	// socket is ScratchDir/ep-<pid>-<n>.<name>.sock (Episode.Sockets), so
	// a Ready that probes the guest's daemon from the host can use it.
	// Names are 1–16 of [a-z0-9_-].
	Sockets map[string]int

	// Warm is how many episodes the pool keeps booted ahead of demand
	// (cloned, started, Ready passed) for Claim and Run to hand over;
	// each one handed over is replaced in the background. 0: every
	// episode boots when it is asked for (cold).
	Warm int
	// WarmMemory caps the idle memory of the warm episodes waiting
	// together, in bytes (0: no cap). Each warm episode's memory is
	// measured once it is ready (Metrics.IdleMemory: the PSS of its
	// processes); one that would take the total over the cap is torn down
	// again, and the pool keeps only as many warm as fit at the largest
	// cost measured so far. Until one is measured, one boots at a time.
	WarmMemory int64
	// RefillDelay is how long the replacement of a claimed warm episode
	// waits before it starts to boot, so that a burst of claims (each
	// caller's first requests to its episode) has the CPUs before the
	// boots behind it: 0 means DefaultRefillDelay, negative none. A claim
	// that finds no warm episode ready ends the wait at once.
	RefillDelay time.Duration
	// RefillNice is the nice value (1–19) warm boots run at until their
	// Ready passes, a claimer waits for them, or they have run niced for
	// a second, when the pool puts them back at its own (always before
	// they join the ready list): a claimed episode never runs niced, and a boot
	// gets only the CPU the claimed ones leave. 0 means DefaultRefillNice,
	// negative leaves boots at the pool's priority. It is the nice of the
	// episode's own autogroups (its sessions': rungv's, the Sentry's, the
	// gofer's), which an unprivileged pool may set too; where autogroups
	// do not weigh it has no effect (docs/runtime.md, "Ready Docker
	// episodes").
	RefillNice int
	// Checkpoint, when set, starts every episode by restoring it
	// (Checkpoint.Restore) instead of booting: the guest goes on from the
	// instant it was saved (a booted daemon, say), on its own clone of the
	// checkpoint's one companion volume, which is then the golden (Golden
	// must be empty; GuestPath, Base's episode fields and Spec do not
	// apply: the checkpoint holds them, and no GVX_EPISODE is added).
	// Sockets must name every port the checkpoint publishes, by its guest
	// port. A warm pool refills faster this way: a restore costs a
	// fraction of a cold boot's CPU. Every restored episode starts from
	// the same memory: a process's own random state (not getrandom) is
	// the same in each.
	Checkpoint *Checkpoint
}

// Pool runs episodes from one golden volume. Its methods are safe for
// concurrent use.
type Pool struct {
	cfg     PoolConfig
	bin     string     // rungv
	base    *spec.Spec // every episode's spec, before its clone's mount
	golden  string
	scratch string
	outMu   sync.Mutex // serializes writes to Base.Stdout/Stderr
	seq     sync.Mutex // guards next
	next    int
	madeDir bool

	// ctx is the pool's life: the sandboxes of warm and claimed episodes
	// run under it, and Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	running int
	closed  bool
	warm    warmState     // guarded by mu
	prio    *treePriority // warm boots' (RefillNice); nil: none
}

// Errors of the pool.
var (
	// ErrPoolClosed reports a Run on a closed Pool.
	ErrPoolClosed = errors.New("gvx: pool is closed")
	// ErrExited reports that the guest exited before the episode was
	// ready (or before WaitOutput saw its text).
	ErrExited = errors.New("gvx: episode exited")
	// ErrHandedOut reports a second handover of one episode: a broken
	// invariant of the pool, never expected.
	ErrHandedOut = errors.New("gvx: episode was already handed out")
)

// PanicError is an episode function's (or Ready's) panic, recovered after
// the episode was torn down.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("gvx: episode panicked: %v", e.Value) }

// NewPool checks cfg and prepares ScratchDir. With CloneMode Always it
// probes ScratchDir for reflink support, so a pool that would copy whole
// volumes fails here, not in its first episode.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Checkpoint != nil {
		if cfg.Golden != "" || cfg.Spec != nil {
			return nil, errors.New("gvx: PoolConfig.Checkpoint is the golden and the spec: leave Golden and Spec empty")
		}
		if err := onlyProcess(cfg.Base); err != nil {
			return nil, fmt.Errorf("%w (PoolConfig.Checkpoint is set)", err)
		}
		vols := volumeMounts(cfg.Checkpoint.Spec)
		if len(vols) != 1 {
			return nil, fmt.Errorf("gvx: PoolConfig.Checkpoint %s has %d volumes: a pool restores onto a clone of exactly one", cfg.Checkpoint.Dir, len(vols))
		}
		cfg.Golden = cfg.Checkpoint.Spec.Mounts[vols[0]].Source
		cfg.Spec = cfg.Checkpoint.Spec
		cfg.GuestPath = cfg.Checkpoint.Spec.Mounts[vols[0]].Target
		if err := checkpointSockets(cfg.Checkpoint, cfg.Sockets); err != nil {
			return nil, err
		}
	}
	if cfg.Golden == "" || cfg.ScratchDir == "" {
		return nil, errors.New("gvx: PoolConfig needs Golden and ScratchDir")
	}
	if cfg.Parallel < 0 || cfg.Timeout < 0 || cfg.OutputLimit < 0 || cfg.Warm < 0 || cfg.WarmMemory < 0 {
		return nil, errors.New("gvx: negative Parallel, Timeout, OutputLimit, Warm or WarmMemory")
	}
	if cfg.RefillNice > 19 {
		return nil, fmt.Errorf("gvx: PoolConfig.RefillNice %d is above 19, the lowest priority", cfg.RefillNice)
	}
	switch {
	case cfg.RefillDelay == 0:
		cfg.RefillDelay = DefaultRefillDelay
	case cfg.RefillDelay < 0:
		cfg.RefillDelay = 0
	}
	if cfg.RefillNice == 0 {
		cfg.RefillNice = DefaultRefillNice
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 1
	}
	if cfg.OutputLimit == 0 {
		cfg.OutputLimit = 1 << 20
	}
	if cfg.GuestPath == "" {
		cfg.GuestPath = DefaultVolumePath
	}
	if cfg.Base.Stdin != nil {
		return nil, errors.New("gvx: PoolConfig.Base.Stdin must be nil (episodes read /dev/null)")
	}
	// Catch a bad Base now rather than once per episode.
	bin, err := findRungv(cfg.Base.Rungv)
	if err != nil {
		return nil, err
	}
	base := cfg.Spec
	if base != nil {
		if err := onlyProcess(cfg.Base); err != nil {
			return nil, fmt.Errorf("%w (PoolConfig.Spec is set)", err)
		}
		if err := base.Validate(); err != nil {
			return nil, fmt.Errorf("gvx: PoolConfig.Spec: %w", err)
		}
		base = base.Clone()
	} else if base, err = cfg.Base.Spec(); err != nil {
		return nil, err
	}
	if !path.IsAbs(cfg.GuestPath) {
		return nil, fmt.Errorf("gvx: PoolConfig.GuestPath %q is not an absolute guest path", cfg.GuestPath)
	}
	for _, m := range base.Mounts {
		if cfg.Checkpoint == nil && path.Clean(m.Target) == path.Clean(cfg.GuestPath) {
			return nil, fmt.Errorf("gvx: Base.Mounts already mounts %s, where the pool mounts the clone", m.Target)
		}
	}
	golden, err := filepath.Abs(cfg.Golden)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(golden)
	if err != nil {
		return nil, fmt.Errorf("gvx: golden volume: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gvx: golden volume %s is not a regular file", golden)
	}
	scratch, err := filepath.Abs(cfg.ScratchDir)
	if err != nil {
		return nil, err
	}
	if err := checkSockets(cfg.Sockets, scratch); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, bin: bin, base: base, golden: golden, scratch: scratch}
	if cfg.Warm > 0 && cfg.RefillNice > 0 {
		p.prio = newTreePriority(cfg.RefillNice) // nil if the pool already runs at it
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.warm.init(p)
	if _, err := os.Stat(scratch); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(scratch, 0o700); err != nil {
			return nil, fmt.Errorf("gvx: scratch dir: %w", err)
		}
		p.madeDir = true
	} else if err != nil {
		return nil, fmt.Errorf("gvx: scratch dir: %w", err)
	}
	p.sweep()
	if cfg.CloneMode == reflink.Always {
		if err := reflink.Probe(scratch); err != nil {
			p.Close()
			return nil, fmt.Errorf("gvx: scratch dir cannot clone (use a reflink filesystem, or CloneMode Auto to copy): %w", err)
		}
	}
	if cfg.Warm > 0 {
		p.fillWarm() // warm ahead of demand
	}
	return p, nil
}

// Spec returns (a copy of) the spec every episode of the pool runs, before
// the pool adds its clone's mount and GVX_EPISODE.
func (p *Pool) Spec() *spec.Spec { return p.base.Clone() }

// sweep removes clones that pools of dead processes left in the scratch
// directory (a caller killed with SIGKILL runs no teardown). Clones of
// live processes, and every other file, are left alone.
func (p *Pool) sweep() {
	names, _ := filepath.Glob(filepath.Join(p.scratch, "ep-*-*"))
	for _, name := range names {
		var pid, seq int
		base := filepath.Base(name)
		if n, _ := fmt.Sscanf(base, "ep-%d-%d.", &pid, &seq); n != 2 || pid <= 0 {
			continue
		}
		prefix := fmt.Sprintf("ep-%d-%04d.", pid, seq)
		rest, ok := strings.CutPrefix(base, prefix)
		ours := ok && (rest == "ext4" || strings.HasSuffix(rest, ".sock") && isSocketName(strings.TrimSuffix(rest, ".sock")))
		if ours && pid != os.Getpid() && processGone(pid) {
			os.Remove(name)
		}
	}
}

// Close ends the pool: it refuses new Runs and Claims, lets boots in
// progress finish (a rungv killed while it starts leaves its state
// directory for the next start to sweep), kills and tears down every warm
// episode and every claimed one not yet closed (their Close then returns
// at once), waits for that, and removes ScratchDir if
// NewPool created it (and it is empty: every episode removes its own
// clone). It fails while a Run is in progress.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.running > 0 {
		p.mu.Unlock()
		return errors.New("gvx: Pool.Close while Run is in progress")
	}
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.warm.group != nil {
		p.warm.group.Stop() // no new boots; claimers waiting get ErrPoolClosed
	}
	p.letStartersSettle()
	p.cancel()
	p.stopWarm()
	if p.madeDir {
		if err := os.Remove(p.scratch); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("gvx: remove scratch dir: %w", err)
		}
	}
	return nil
}

// Metrics is what one episode cost. Durations are zero for phases that did
// not happen.
type Metrics struct {
	Episode int
	// Reset is the clone of the golden volume.
	Reset time.Duration
	// Claim is from asking for the episode (Claim, or Run taking its
	// next) to having it with Ready passed: for a cold episode its whole
	// boot, for a warm one the wait for it (none, when one is ready).
	Claim time.Duration
	// Warm says the episode came from the warm pool.
	Warm bool
	// IdleMemory is what the episode's processes held once it was ready,
	// in bytes: their proportional set size (PSS) where the host lets the
	// pool read it (/proc/PID/smaps_rollup), else their resident set size
	// (IdleMemoryPSS false); -1 if not measured (no Ready, not Linux).
	IdleMemory    int64
	IdleMemoryPSS bool
	// Ready is from the sandbox's start to Ready returning (zero without
	// Ready).
	Ready time.Duration
	// Run is the episode function.
	Run time.Duration
	// Teardown is killing the sandbox, waiting for its processes, and
	// unlinking the clone.
	Teardown time.Duration
	// Total is from the clone's start to the end of the teardown.
	Total time.Duration
	// CloneMethod says whether the volume was cloned or copied.
	CloneMethod reflink.Method
	// CloneBytes is the clone's length; AllocatedBytes what the clone had
	// allocated on the host just before it was removed that it did not
	// share with another file (blocks the episode wrote): -1 where the host
	// cannot tell.
	CloneBytes     int64
	AllocatedBytes int64
	// ExitCode is the guest's exit status if it exited by itself before
	// the teardown, else -1.
	ExitCode int
	// Stdout and Stderr are the guest's output, up to OutputLimit each.
	Stdout, Stderr []byte
	// Err is the episode's error: from the clone, the start, Ready, the
	// function (a *PanicError if it panicked), the timeout, or teardown.
	Err error
}

// Run runs n episodes, Parallel at a time: each clones the golden volume,
// starts its sandbox, waits for Ready, calls fn, then tears down (kills
// the sandbox, waits for it, removes the clone) whatever happened: an
// error, a timeout, a cancelled ctx or a panic in fn. It returns one
// Metrics per episode, in episode order, and the errors of all failed
// episodes joined. Episodes not started when ctx is done report ctx.Err().
//
// When an episode's context ends (Timeout, or ctx), its sandbox is killed
// at once, but its clone is removed only once Ready and fn have returned:
// they must return when their ctx is done.
func (p *Pool) Run(ctx context.Context, n int, fn func(ctx context.Context, ep *Episode) error) ([]Metrics, error) {
	if fn == nil {
		return nil, errors.New("gvx: Pool.Run needs an episode function")
	}
	if n < 0 {
		return nil, errors.New("gvx: Pool.Run with a negative count")
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	p.running++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running--
		p.mu.Unlock()
	}()

	ms := make([]Metrics, n)
	if p.cfg.Warm > 0 {
		p.fillWarm()
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(p.cfg.Parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ms[i] = p.episode(ctx, i, fn)
			}
		}()
	}
	i := 0
feed:
	for ; i < n; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	for ; i < n; i++ {
		ms[i] = Metrics{Episode: i, ExitCode: -1, AllocatedBytes: -1, IdleMemory: -1, Err: ctx.Err()}
	}
	var errs []error
	for _, m := range ms {
		if m.Err != nil {
			errs = append(errs, fmt.Errorf("episode %d: %w", m.Episode, m.Err))
		}
	}
	return ms, errors.Join(errs...)
}

// episode runs one episode of Run: a cold boot, or a claim from the warm
// pool; it never panics and always tears down.
func (p *Pool) episode(ctx context.Context, i int, fn func(context.Context, *Episode) error) (m Metrics) {
	t0 := time.Now()
	if p.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return Metrics{Episode: i, ExitCode: -1, AllocatedBytes: -1, IdleMemory: -1, Err: err}
	}
	var ep *Episode
	var err error
	if p.cfg.Warm > 0 {
		if ep, err = p.claimWarm(ctx, t0); err != nil {
			return Metrics{Episode: i, ExitCode: -1, AllocatedBytes: -1, IdleMemory: -1, Claim: time.Since(t0), Err: err}
		}
		// A warm sandbox runs under the pool's context: the episode's
		// ending (Timeout, ctx) kills it as it kills a cold one.
		defer context.AfterFunc(ctx, ep.kill)()
	} else if ep, err = p.boot(ctx, ctx, i, i, nil); err != nil {
		m = ep.m
		m.Claim = time.Since(t0)
		m.Episode = i
		return m
	}
	ep.setClaim(time.Since(t0), p.cfg.Warm > 0)

	// Teardown runs whatever happens below, panics included.
	defer func() {
		if r := recover(); r != nil {
			ep.m.Err = &PanicError{Value: r, Stack: debug.Stack()}
		}
		p.release(ep)
		m = ep.Metrics()
		m.Episode = i
	}()
	tRun := time.Now()
	err = fn(ctx, ep)
	ep.m.Run = time.Since(tRun)
	if ep.exitedEarly() {
		ep.m.ExitCode = ep.code
	}
	if err == nil {
		err = ctx.Err()
	}
	ep.m.Err = err
	return m
}

// boot makes episode id (its clone's number seq): clones the golden
// volume, starts the sandbox under life (which kills it when done), and
// waits for Ready under ctx. It always returns the episode, with its
// metrics so far; on an error it has torn it down, and the error is also
// ep.m.Err.
// warmBoot marks a boot for the warm list (nil: a cold one): urgent is
// closed when a claimer waits for it, which ends RefillNice for it.
type warmBoot struct {
	urgent <-chan struct{}
}

func (p *Pool) boot(life, ctx context.Context, id, seq int, warm *warmBoot) (ep *Episode, err error) {
	t0 := time.Now()
	vol := filepath.Join(p.scratch, fmt.Sprintf("ep-%d-%04d.ext4", os.Getpid(), seq))
	ep = &Episode{ID: id, Volume: vol, pool: p, t0: t0, done: make(chan struct{}), code: -1}
	ep.m = Metrics{Episode: id, ExitCode: -1, AllocatedBytes: -1, IdleMemory: -1}
	ep.stdout = &capture{limit: p.cfg.OutputLimit, changed: make(chan struct{})}
	ep.stderr = &capture{limit: p.cfg.OutputLimit, changed: make(chan struct{})}
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
		if err != nil {
			ep.m.Err = err
			p.teardown(ep)
		}
	}()
	var sb *Sandbox
	if p.cfg.Checkpoint != nil {
		ep.Sockets = p.sockets(seq)
		proc := Config{Rungv: p.cfg.Base.Rungv, HostCPUs: p.cfg.Base.HostCPUs, Stdout: p.tee(ep.stdout, p.cfg.Base.Stdout), Stderr: p.tee(ep.stderr, p.cfg.Base.Stderr),
			Ports: restorePorts(p.cfg.Checkpoint, p.cfg.Sockets, ep.Sockets)}
		sb, err = p.cfg.Checkpoint.Restore(ctx, []string{vol}, proc)
		ep.m.Reset = time.Since(t0)
		if err != nil {
			if _, serr := os.Stat(vol); serr != nil {
				ep.Volume = ""
			}
			return ep, err
		}
		return p.start(life, ctx, ep, sb, warm)
	}
	res, err := reflink.CloneFile(p.golden, vol, reflink.Options{Mode: p.cfg.CloneMode, NoSync: true})
	ep.m.Reset = time.Since(t0)
	ep.m.CloneMethod, ep.m.CloneBytes = res.Method, res.Size
	if err != nil {
		ep.Volume = "" // nothing to remove
		return ep, fmt.Errorf("clone golden volume: %w", err)
	}
	s := p.base.Clone()
	s.Mounts = append(s.Mounts, spec.Mount{Type: spec.MountVolume, Source: vol, Target: p.cfg.GuestPath})
	s.Env = append(s.Env, "GVX_EPISODE="+strconv.Itoa(id))
	ep.Sockets = p.sockets(seq)
	for _, name := range slices.Sorted(maps.Keys(ep.Sockets)) {
		s.Ports = append(s.Ports, spec.Port{HostSocket: ep.Sockets[name], GuestPort: p.cfg.Sockets[name]})
	}
	proc := Config{HostCPUs: p.cfg.Base.HostCPUs, Stdout: p.tee(ep.stdout, p.cfg.Base.Stdout), Stderr: p.tee(ep.stderr, p.cfg.Base.Stderr)}
	if sb, err = newSandbox(p.bin, s, proc); err != nil {
		return ep, err
	}
	return p.start(life, ctx, ep, sb, warm)
}

// start runs sb as ep's sandbox under life and waits for Ready under ctx
// (boot's second half); a warm boot runs at RefillNice until then.
func (p *Pool) start(life, ctx context.Context, ep *Episode, sb *Sandbox, warm *warmBoot) (*Episode, error) {
	ep.Sandbox = sb
	tStart := time.Now()
	if life == p.ctx { // Close kills it: Close waits until its boot is over
		p.mu.Lock()
		p.warm.starting[ep] = struct{}{}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.warm.starting, ep)
			p.mu.Unlock()
		}()
	}
	restore := func() error { return nil }
	if warm != nil && p.prio != nil {
		sb.ownSession = true // its autogroup is the episode's
		restore = p.prio.background(sb, ep.done, warm.urgent)
	}
	go func() {
		ep.code, ep.err = sb.Run(life)
		ep.stdout.close()
		ep.stderr.close()
		close(ep.done)
	}()
	if p.cfg.Ready != nil {
		if err := p.cfg.Ready(ctx, ep); err != nil {
			_ = restore() // its teardown follows
			if ep.exitedEarly() {
				ep.m.ExitCode = ep.code
			}
			return ep, fmt.Errorf("not ready: %w", err)
		}
		ep.m.Ready = time.Since(tStart)
	}
	if err := restore(); err != nil {
		return ep, err
	}
	if p.cfg.Ready != nil {
		ep.m.IdleMemory, ep.m.IdleMemoryPSS = treeMemory(sb.Pid())
	}
	return ep, nil
}

// teardown kills ep's sandbox, waits for it, and removes its clone and
// sockets, once; it completes ep's metrics.
func (p *Pool) teardown(ep *Episode) {
	ep.once.Do(func() {
		td := time.Now()
		if ep.Sandbox != nil {
			_ = ep.Sandbox.Close()
			<-ep.done
		}
		ep.mmu.Lock()
		defer ep.mmu.Unlock()
		ep.m.Stdout, ep.m.Stderr = ep.Stdout(), ep.Stderr()
		if ep.Volume != "" {
			ep.m.AllocatedBytes = unsharedBytes(ep.Volume)
			if err := os.Remove(ep.Volume); err != nil && ep.m.Err == nil {
				ep.m.Err = fmt.Errorf("remove clone: %w", err)
			}
		}
		for _, sock := range ep.Sockets {
			_ = os.Remove(sock) // rungv may have removed it
		}
		ep.m.Teardown = time.Since(td)
		ep.m.Total = time.Since(ep.t0)
	})
}

// tee writes to the episode's capture and, serialized, to the shared w.
func (p *Pool) tee(c *capture, w io.Writer) io.Writer {
	if w == nil {
		return c
	}
	return writerFunc(func(b []byte) (int, error) {
		c.Write(b)
		p.outMu.Lock()
		defer p.outMu.Unlock()
		return w.Write(b)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Episode is one running episode, handed to Ready and the episode function.
type Episode struct {
	// ID numbers the episodes of a Run from 0; the guest sees it as
	// $GVX_EPISODE.
	ID int
	// Volume is the host path of the episode's clone.
	Volume string
	// Sandbox is the running sandbox. The pool closes it; the function may
	// close it early.
	Sandbox *Sandbox
	// Sockets are the host paths of PoolConfig.Sockets for this episode,
	// by name.
	Sockets map[string]string

	pool   *Pool
	t0     time.Time
	m      Metrics    // the pool's record; complete once torn down
	mmu    sync.Mutex // guards m during and after the teardown
	once   sync.Once
	handed atomic.Bool // handed over by Claim (never twice)

	done           chan struct{}
	code           int
	err            error
	stdout, stderr *capture
}

// Done is closed when the guest has exited (or the sandbox was killed).
func (e *Episode) Done() <-chan struct{} { return e.done }

// Wait waits for the guest to exit and returns its exit code, as
// Sandbox.Run does.
func (e *Episode) Wait(ctx context.Context) (int, error) {
	select {
	case <-e.done:
		return e.code, e.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

func (e *Episode) exitedEarly() bool {
	select {
	case <-e.done:
		return e.err == nil
	default:
		return false
	}
}

// Stdout returns the guest's standard output so far (up to the pool's
// OutputLimit); Stderr its standard error.
func (e *Episode) Stdout() []byte { return e.stdout.bytes() }

// Stderr returns the guest's standard error so far.
func (e *Episode) Stderr() []byte { return e.stderr.bytes() }

// WaitOutput waits until the guest's standard output contains s. It fails
// with ErrExited if the guest exits first.
func (e *Episode) WaitOutput(ctx context.Context, s string) error {
	for {
		ok, changed, closed := e.stdout.contains(s)
		if ok {
			return nil
		}
		if closed {
			<-e.done
			if e.err != nil {
				return fmt.Errorf("%w before printing %q: %w", ErrExited, s, e.err)
			}
			return fmt.Errorf("%w (status %d) before printing %q", ErrExited, e.code, s)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// capture keeps the first limit bytes written to it and wakes waiters.
type capture struct {
	mu      sync.Mutex
	buf     []byte
	limit   int
	changed chan struct{} // closed and replaced on every write
	closed  bool
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, b[:min(room, len(b))]...)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return len(b), nil
}

func (c *capture) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

func (c *capture) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf)
}

func (c *capture) contains(s string) (found bool, changed <-chan struct{}, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Contains(c.buf, []byte(s)), c.changed, c.closed
}

// Summary aggregates the Metrics of a Run.
type Summary struct {
	Episodes, Failed int
	Parallel         int
	Wall             time.Duration
	// PerMinute is episodes finished per minute of wall time.
	PerMinute float64
	// Median and 95th percentile of each phase over episodes that got
	// that far.
	Reset, Ready, Run, Teardown, Total Quantiles
	// Claim is over every episode handed over; Warm counts those that
	// came from the warm pool.
	Claim Quantiles
	Warm  int
	// AllocatedBytes is the median of the clones' unshared allocation (-1
	// if unknown).
	AllocatedBytes int64
	// IdleMemory is the median of the episodes' idle memory (bytes, -1 if
	// none was measured), IdleMemoryMax the largest; IdleMemoryPSS says
	// every one measured was a PSS.
	IdleMemory, IdleMemoryMax int64
	IdleMemoryPSS             bool
}

// Quantiles are a phase's median and 95th percentile.
type Quantiles struct{ P50, P95, Max time.Duration }

// Summarize aggregates ms, which took wall time with parallel episodes.
func Summarize(ms []Metrics, parallel int, wall time.Duration) Summary {
	s := Summary{Episodes: len(ms), Parallel: parallel, Wall: wall, AllocatedBytes: -1, IdleMemory: -1, IdleMemoryMax: -1, IdleMemoryPSS: true}
	var reset, ready, run, td, total, claim []time.Duration
	var alloc, mem []int64
	for _, m := range ms {
		if m.Claim > 0 && (m.Err == nil || m.Run > 0) {
			claim = append(claim, m.Claim)
		}
		if m.Warm {
			s.Warm++
		}
		if m.IdleMemory >= 0 {
			mem = append(mem, m.IdleMemory)
			s.IdleMemoryPSS = s.IdleMemoryPSS && m.IdleMemoryPSS
		}
		if m.Err != nil {
			s.Failed++
		}
		if m.Reset > 0 {
			reset = append(reset, m.Reset)
		}
		if m.Ready > 0 {
			ready = append(ready, m.Ready)
		}
		if m.Run > 0 {
			run = append(run, m.Run)
		}
		if m.Teardown > 0 {
			td = append(td, m.Teardown)
		}
		if m.Total > 0 {
			total = append(total, m.Total)
		}
		if m.AllocatedBytes >= 0 {
			alloc = append(alloc, m.AllocatedBytes)
		}
	}
	if wall > 0 {
		s.PerMinute = float64(len(ms)-s.Failed) / wall.Minutes()
	}
	s.Reset, s.Ready, s.Run, s.Teardown, s.Total = quantiles(reset), quantiles(ready), quantiles(run), quantiles(td), quantiles(total)
	s.Claim = quantiles(claim)
	if len(alloc) > 0 {
		slices.Sort(alloc)
		s.AllocatedBytes = alloc[len(alloc)/2]
	}
	if len(mem) > 0 {
		slices.Sort(mem)
		s.IdleMemory, s.IdleMemoryMax = mem[len(mem)/2], mem[len(mem)-1]
	} else {
		s.IdleMemoryPSS = false
	}
	return s
}

func quantiles(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Quantiles{P50: at(0.5), P95: at(0.95), Max: d[len(d)-1]}
}
