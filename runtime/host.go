package runtime

import (
	"errors"
	"io"
	"time"

	episodenet "z.gfire.dev/gvx/runtime/net"
	"z.gfire.dev/gvx/spec"
)

// Errors returned by the runtime.
var (
	// ErrUnsupported reports a request the runtime cannot serve yet (a
	// registry image, a network mode, a mount kind).
	ErrUnsupported = errors.New("rungv: not supported")
	// ErrNoCommand reports an episode with neither an entrypoint nor a
	// command, as docker run does.
	ErrNoCommand = errors.New("rungv: no command specified")
	// ErrBadOption reports a malformed option value.
	ErrBadOption = errors.New("rungv: bad option")
)

// The episode's vocabulary is package spec's (one name per concept from
// the SDK to the sandbox); these aliases keep runtime's names for it.
type (
	// NetworkMode selects the guest's network (spec.NetworkMode).
	NetworkMode = spec.NetworkMode
	// Isolation selects the walls rungv builds around the Sentry on the
	// host, beyond gVisor's own (spec.Isolation).
	Isolation = spec.Isolation
	// PullPolicy says when an image named by a registry reference is
	// fetched from its registry rather than taken from the image cache
	// (spec.PullPolicy).
	PullPolicy = spec.PullPolicy
	// MountType is the kind of a Mount (spec.MountType).
	MountType = spec.MountType
	// Mount is one filesystem mounted into the guest (spec.Mount): Source
	// is the host path (volume file or directory; empty for tmpfs), Target
	// the absolute guest path. Size is the size of the volume
	// CreateMissingVolume makes when Source does not exist (0:
	// DefaultVolumeSize); AllowForeignOwner lets a volume file owned by
	// another uid than the caller's be mounted; MaxOpen bounds the files
	// the guest may hold open on the volume (0: volume.DefaultMaxOpen),
	// past which opens fail with ENFILE.
	Mount = spec.Mount
	// LimitsPolicy says what Run does when a limit cannot be enforced
	// on the host (spec.LimitsPolicy).
	LimitsPolicy = spec.LimitsPolicy
)

// Network modes.
const (
	// NetworkNone gives the guest a loopback interface only.
	NetworkNone = spec.NetworkNone
	// NetworkNAT gives the guest slirp's layout (eth0 10.0.2.15/24,
	// gateway 10.0.2.2 = the host's 127.0.0.1 on the spec's AllowHostPorts
	// only, DNS 10.0.2.3 = the host's nameserver) with outbound TCP and
	// UDP made by the host process's own sockets, to the destinations the
	// egress policy allows: by default the outside world only
	// (spec.Spec.Egress; runtime/net/nat_linux.go; docs/runtime.md
	// "Networking").
	NetworkNAT = spec.NetworkNAT
)

// Isolation modes.
const (
	// IsolationAuto (the default, "") uses the strongest mode this host
	// allows: IsolationNamespaces where user namespaces can be made,
	// otherwise IsolationSeccompOnly.
	IsolationAuto = spec.IsolationAuto
	// IsolationNamespaces runs the sandbox in user, network and PID
	// namespaces of the episode's own, with a /proc of its own.
	IsolationNamespaces = spec.IsolationNamespaces
	// IsolationSeccompOnly makes no namespace: for hosts that refuse
	// them (an unprivileged container or Kubernetes pod, a gVisor
	// sandbox). The rootfs is an EROFS file the Sentry opens itself and
	// the network is user-space; the host processes still lock down.
	IsolationSeccompOnly = spec.IsolationSeccompOnly
)

// Pull policies.
const (
	// PullMissing (the default, "") uses a name the cache knows (a local
	// tag, or an image pulled before) and pulls only when it does not.
	PullMissing = spec.PullMissing
	// PullAlways fetches from the registry every time.
	PullAlways = spec.PullAlways
	// PullNever never touches the network: a name the cache does not
	// know is an error.
	PullNever = spec.PullNever
)

// DefaultNATMaxRelays is the default of spec.Spec.NATMaxRelays.
const DefaultNATMaxRelays = episodenet.DefaultMaxRelays

// Mount types.
const (
	// MountVolume is an ext4 volume file served by ext4lite.
	MountVolume = spec.MountVolume
	// MountBind is a host directory.
	MountBind = spec.MountBind
	// MountTmpfs is an empty in-memory filesystem.
	MountTmpfs = spec.MountTmpfs
)

// StartInfo describes an episode as it starts.
type StartInfo struct {
	// Limits says who enforces MemoryBytes and CPUs: "sentry", or
	// "sentry + cgroup v1 (memory, cpu)" and the like; "" without limits.
	Limits string
	// Enforcement says, for each limit in force ("memory", "cpus",
	// "pids"), what enforces it on the host: "cgroup v2", "cgroup v1",
	// "rlimit (user namespace)", or "sentry only (best effort)".
	Enforcement map[string]string
	// Isolation is the mode the episode runs in (IsolationNamespaces or
	// IsolationSeccompOnly), never IsolationAuto.
	Isolation Isolation
}

// Limits policies.
const (
	// LimitsStrict (the default) refuses to start an episode whose
	// memory or CPU limit nothing on the host would enforce (no cgroup
	// may be made: not root, no delegated cgroup v2 subtree).
	LimitsStrict = spec.LimitsStrict
	// LimitsBestEffort starts it anyway, with the Sentry's own shaping
	// (what the guest sees) as the only bound, and says so.
	LimitsBestEffort = spec.LimitsBestEffort
)

// DefaultPidsLimit bounds the host tasks (processes and threads: the
// Sentry's, its stubs', the gofer's) one episode may have, when
// the spec's limits.pids is 0.
const DefaultPidsLimit = 4096

// ErrLimits reports a limit that nothing on this host would enforce.
var ErrLimits = errors.New("rungv: limit not enforceable here")

// Host is what running an episode takes besides its description (the
// spec.Spec): where its standard streams go, the caches and logs on this
// host, what to call when it starts, how long it has to stop, and the
// checkpoint and restore this process drives. Its zero value is the
// defaults.
type Host struct {
	// Stdin, Stdout, Stderr default to the process's own.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// CacheDir is the image cache (package erofs/cache); "" means
	// image.DefaultCacheDir. An unwritable cache falls back to one in the
	// episode's scratch directory.
	CacheDir string
	// DebugLogDir, when set, receives runsc's debug logs.
	DebugLogDir string
	// ProfileDir, when set, receives the Sentry's Go CPU profile over the
	// episode's whole life: ProfileDir/<episode id>.cpu.pprof (pprof's
	// format; `go tool pprof -top FILE`), written when the sandbox
	// ends. The directory must be the caller's and writable by nobody else
	// (the profile is created there by name). It turns on runsc's --profile, which loosens the Sentry's
	// seccomp filter for the profiler's system calls: for measuring, never
	// for episodes that run untrusted code in production.
	ProfileDir string

	// CPUs, when set, are the host CPUs the episode's processes (the
	// Sentry, its stubs, the gofer) may run on: this process confines
	// itself to them before it starts any. The guest then sees that many
	// CPUs (gVisor counts the CPUs it may use when it boots) unless spec
	// limits.cpus says otherwise. On a machine where cross-CPU wake-ups are
	// dear, one CPU per episode costs far less CPU than all of them
	// (docs/runtime.md); spreading episodes over CPUs is the caller's.
	CPUs []int

	// OnStart, when set, is called once the episode is about to start.
	OnStart func(StartInfo)
	// StopTimeout is how long the guest has to exit after this process
	// gets SIGTERM or SIGINT (which the guest gets too) before it is
	// killed: 0 means the package's StopTimeout (10 s, as docker stop);
	// negative means at once, without telling the guest — what the Go
	// SDK's Close asks for (rungv run --stop-timeout 0), so that rungv has
	// torn the episode down, host cgroups included, well within the
	// bound after which the SDK sends SIGKILL.
	StopTimeout time.Duration

	// CheckpointDir, when set, prepares the episode to be checkpointed
	// once, into this directory (made if missing; it must not hold a
	// checkpoint), on a request on Control (ControlRequest).
	// IsolationSeccompOnly only.
	CheckpointDir string
	// RestoreFrom, when set, starts the episode by restoring the
	// checkpoint in this directory instead of starting the image's
	// command: the guest continues where the checkpointed one was, on the
	// volumes of the spec's mounts (fresh clones of the checkpoint's
	// companion volumes, at the same targets). The spec's image must be
	// the checkpointed episode's; its args, env and the like are the
	// checkpoint's. IsolationSeccompOnly only.
	RestoreFrom string
	// Control, when set, carries ControlRequests (JSON lines) from the
	// caller and the replies back: a socket, for rungv run --control-fd.
	Control io.ReadWriter
}
