package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/internal/privdir"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
)

// Config is a Server's configuration. Zero values are the documented
// defaults.
type Config struct {
	// StateDir holds the server's lock and one directory per episode
	// (its record, its clone of the golden volume, its sockets). It is
	// created (0700) if missing. What is in it is trusted (a record names
	// a process to kill, a socket an exec goes to), so an existing one
	// must be a directory, not a symlink, owned by the server's user and
	// writable by no one else: New refuses any other (DefaultStateDir's
	// fallback in the temporary directory must be mode 0700 exactly). For
	// reflink clones it must be on the golden volumes' filesystem. Unix
	// sockets live in it, so its path must be short (at most
	// MaxStateDirLen bytes).
	StateDir string
	// Rungv is the rungv binary ("": $GVX_RUNGV, then PATH, as package
	// gvx finds it).
	Rungv string
	// MaxEpisodes is the hard cap on live episodes, starting ones
	// included (0: 16). A create beyond it is refused: ErrCapacity, HTTP
	// 429 with Retry-After.
	MaxEpisodes int
	// RetryAfter is what a refused create is told to wait (0: 1s).
	RetryAfter time.Duration
	// DefaultTTL is an episode's lifetime when its create asks for none
	// (0: 1h); MaxTTL bounds what a create may ask for (0: 24h).
	DefaultTTL, MaxTTL time.Duration
	// DefaultLease is the lease of an episode whose create asks for none
	// (0: 60s): the episode is torn down when no request for it has been
	// in flight for that long (its client is gone). A negative value
	// means no lease by default (TTL only).
	DefaultLease time.Duration
	// ReadyTimeout bounds an episode's start, from its clone to its agent
	// answering and, when the create waits for it (CreateRequest.Wait),
	// its Docker daemon (0: 2m).
	ReadyTimeout time.Duration
	// CloneMode is how golden volumes are cloned: reflink.Always (the
	// zero value) clones only; reflink.Auto falls back to a sparse copy.
	// A StateDir whose filesystem cannot reflink (reflink.Probe at New) is
	// refused at start when RequireReflink is set; otherwise the server
	// logs a warning naming the cost and the fix, and copies (Auto).
	CloneMode reflink.Mode
	// RequireReflink makes New refuse a StateDir that cannot reflink
	// rather than fall back to copying: rungv serve sets it for an
	// explicit --clone always, so a node meant to clone says so at start
	// instead of answering 500 to its first golden create, or degrading.
	RequireReflink bool
	// AgentPort is the guest port of the in-guest agent (0:
	// agent.DefaultPort).
	AgentPort int
	// MaxUploadBytes bounds one file or archive upload (0: 8 GiB).
	MaxUploadBytes int64
	// Warm are the requests the server keeps episodes of booted ahead of
	// demand (WarmSpec); a create that matches one is a claim. Warm
	// episodes waiting for a claim are not counted in MaxEpisodes (their
	// counts bound them); a claimed one is.
	Warm []WarmSpec
	// WarmMemory caps the idle memory (PSS where readable) of all warm
	// episodes waiting for a claim together (0: no cap). The server
	// learns one episode's cost from its first boot of each set and boots
	// no more than fit; an episode that would cross the cap once booted
	// is torn down.
	WarmMemory int64
	// RefillDelay is how long the replacement of a claimed warm episode
	// waits before it boots, so that a burst of claims has the CPUs before
	// the boots behind it (gvx.PoolConfig.RefillDelay; 0:
	// gvx.DefaultRefillDelay, negative: none). A create that finds its
	// set empty ends the wait at once.
	RefillDelay time.Duration
	// RefillNice is the nice value (1–19) warm boots run at until they are
	// ready, or for at most a second (gvx.Sandbox.BootNiced, as
	// gvx.PoolConfig.RefillNice): the claimed episodes get the CPUs first.
	// 0 means gvx.DefaultRefillNice; negative, none.
	RefillNice int
	// PinCPUs says when an episode's host processes (its Sentry, stubs
	// and gofer) run on one host CPU, the one with the fewest of this
	// server's pinned live episodes (gvx.Config.HostCPUs, rungv run
	// --host-cpus), among the CPUs the server itself may use; released
	// when the episode ends. PinPacked (the default, ""): once the live
	// episodes are at least as many as those CPUs, the episode that makes
	// them so and every live one still on all CPUs (its processes moved,
	// gvx.Sandbox.SetHostCPUs), and every later one; PinAlways: every
	// episode (one episode alone then never uses more than one CPU);
	// PinNever: none. A pinned episode keeps its CPU until it ends. A
	// guest pinned from its start sees one CPU (gVisor counts them when
	// it boots) unless limits.cpus says otherwise; one moved later keeps
	// the count it booted with. Where waking a thread on another CPU is
	// dear (a PVM guest, where an IPI is a hypercall) a pinned episode
	// costs a third less CPU and its idle healthchecks ~40 % less
	// (docs/runtime.md). Linux only.
	PinCPUs PinMode
	// DefaultMemory is the memory limit (spec.Limits.MemoryBytes) of an
	// episode whose create asks for none (0: DefaultEpisodeMemory, 4 GiB;
	// negative: none, the host's memory). It is enforced as the create's
	// own limit would be (rungv run -m, docs/runtime.md): by a host cgroup
	// where one can be made. Where none can (not root, no delegated
	// cgroup v2 subtree) an episode whose create set no limits policy
	// and no CPUs gets it best-effort rather than being refused: the
	// guest then sees that much memory, but nothing on the host bounds
	// what the sandbox takes.
	DefaultMemory int64
	// ReadHeaderTimeout, IdleTimeout, ReadTimeout and WriteTimeout bound
	// the clients' connections, and MaxConns how many may be open at once
	// per listener (see DefaultReadHeaderTimeout). 0 means the default;
	// negative, none (ReadHeaderTimeout may not be negative). ReadTimeout
	// and WriteTimeout are per read and per write (a stall), not per
	// request: streams and large transfers run as long as they progress.
	ReadHeaderTimeout, IdleTimeout, ReadTimeout, WriteTimeout time.Duration
	MaxConns                                                  int
	// Logf, if set, receives one line per episode event.
	Logf func(format string, args ...any)
}

// DefaultEpisodeMemory is Config.DefaultMemory's default: the memory
// limit of an episode whose create asks for none.
const DefaultEpisodeMemory = 4 << 30

// MaxStateDirLen bounds the state directory's path: an episode's sockets
// (StateDir/ep/ID/docker.sock) must fit a unix socket address (108 bytes).
const MaxStateDirLen = 108 - 1 - len("/ep/0123456789abcdef/docker.sock")

func (c *Config) setDefaults() error {
	if c.StateDir == "" {
		return errors.New("serve: Config.StateDir is empty (rungv serve --state-dir DIR)")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	if len(c.StateDir) > MaxStateDirLen {
		return fmt.Errorf("serve: state dir %s is %d bytes long, over %d: episode sockets would not fit a unix socket address; use a shorter --state-dir", c.StateDir, len(c.StateDir), MaxStateDirLen)
	}
	if c.MaxEpisodes < 0 || c.DefaultTTL < 0 || c.MaxTTL < 0 || c.ReadyTimeout < 0 || c.RetryAfter < 0 || c.MaxUploadBytes < 0 || c.AgentPort < 0 || c.AgentPort > 65535 {
		return errors.New("serve: negative MaxEpisodes, TTL, ReadyTimeout, RetryAfter, MaxUploadBytes, or bad AgentPort")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxEpisodes == 0 {
		c.MaxEpisodes = 16
	}
	def(&c.RetryAfter, time.Second)
	def(&c.DefaultTTL, time.Hour)
	def(&c.MaxTTL, 24*time.Hour)
	def(&c.DefaultLease, 60*time.Second)
	def(&c.ReadyTimeout, 2*time.Minute)
	if c.DefaultTTL > c.MaxTTL {
		return fmt.Errorf("serve: DefaultTTL %v is over MaxTTL %v", c.DefaultTTL, c.MaxTTL)
	}
	if c.AgentPort == 0 {
		c.AgentPort = agent.DefaultPort
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = agent.MaxFileBytes
	}
	switch {
	case c.RefillDelay == 0:
		c.RefillDelay = gvx.DefaultRefillDelay
	case c.RefillDelay < 0:
		c.RefillDelay = 0
	}
	switch {
	case c.RefillNice > 19:
		return fmt.Errorf("serve: RefillNice %d is above 19, the lowest priority", c.RefillNice)
	case c.RefillNice == 0:
		c.RefillNice = gvx.DefaultRefillNice
	case c.RefillNice < 0:
		c.RefillNice = 0
	}
	if c.ReadHeaderTimeout < 0 {
		return errors.New("serve: Config.ReadHeaderTimeout is negative: a connection needs one (it is what cuts a slowloris); 0 is the default, 10s")
	}
	switch {
	case c.DefaultMemory == 0:
		c.DefaultMemory = DefaultEpisodeMemory
	case c.DefaultMemory < 0:
		c.DefaultMemory = 0
	}
	for _, t := range []struct {
		d *time.Duration
		v time.Duration
	}{{&c.ReadHeaderTimeout, DefaultReadHeaderTimeout}, {&c.IdleTimeout, DefaultIdleTimeout}, {&c.ReadTimeout, DefaultReadTimeout}, {&c.WriteTimeout, DefaultWriteTimeout}} {
		switch {
		case *t.d == 0:
			*t.d = t.v
		case *t.d < 0:
			*t.d = 0
		}
	}
	switch {
	case c.MaxConns == 0:
		c.MaxConns = DefaultMaxConns
	case c.MaxConns < 0:
		c.MaxConns = 0
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return ensureStateDir(c.StateDir)
}

// DefaultStateDir is rungv serve's state directory without --state-dir:
// $XDG_RUNTIME_DIR/gvx-serve, else /run/gvx for root, else
// $TMPDIR/gvx-serve-UID. The last is in a directory every user may write
// in, so someone may have made it first: New keeps it only if it is this
// user's and mode 0700 exactly.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gvx-serve")
	}
	if os.Geteuid() == 0 {
		return "/run/gvx"
	}
	return sharedTmpStateDir()
}

// sharedTmpStateDir is DefaultStateDir's fallback in the temporary
// directory.
func sharedTmpStateDir() string {
	return filepath.Join(os.TempDir(), "gvx-serve-"+strconv.Itoa(os.Geteuid()))
}

// ensureStateDir makes dir (0700) if missing and refuses it unless it is
// private (privdir): another user must not have made it first.
func ensureStateDir(dir string) error {
	want := privdir.Want{}
	if dir == sharedTmpStateDir() {
		want.Perm = 0o700
	}
	if err := want.Ensure(dir); err != nil {
		return fmt.Errorf("serve: state dir: %w; what is in it is trusted, so remove it (rungv serve makes it again) or pass --state-dir DIR of your own (or set XDG_RUNTIME_DIR)", err)
	}
	return nil
}
