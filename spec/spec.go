package spec

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Version is the spec version this package reads and writes. A spec of
// any other version is refused (Parse), so a reader never half-understands
// a newer writer.
const Version = 1

// Spec is one episode, with docker run's meaning. The zero value of every
// field but Version and Image is a documented default; Validate says what
// is wrong with a Spec, field by field.
type Spec struct {
	// Version is the format's version: Version (1).
	Version int `json:"version"`

	// Image names the image as package image takes it: oci:DIR[:REF],
	// docker-archive:TAR[:TAG], a name tagged in the image cache, or a
	// registry reference.
	Image string `json:"image"`
	// Pull says when a registry reference is fetched ("": PullMissing).
	Pull PullPolicy `json:"pull,omitempty"`

	// Entrypoint replaces the image's Entrypoint when not nil, and then
	// drops the image's Cmd (docker run --entrypoint); an empty, non-nil
	// Entrypoint (JSON []) clears it. nil (JSON absent or null) keeps it.
	Entrypoint []string `json:"entrypoint,omitzero"`
	// Args replace the image's Cmd when not empty.
	Args []string `json:"args,omitempty"`
	// Env is KEY=VALUE pairs added to (and overriding) the image's Env.
	Env []string `json:"env,omitempty"`
	// User is "user[:group]", names or numbers; "" keeps the image's.
	User string `json:"user,omitempty"`
	// Workdir is an absolute guest path replacing the image's WorkingDir;
	// "" keeps it ("/" if none).
	Workdir string `json:"workdir,omitempty"`

	// Mounts are the filesystems mounted into the guest, in order.
	Mounts []Mount `json:"mounts,omitempty"`
	// Ports publish guest TCP ports on the host.
	Ports []Port `json:"ports,omitempty"`

	// Network is the guest's network ("": NetworkNone).
	Network NetworkMode `json:"network,omitempty"`
	// Egress is the NAT's egress policy, rules as package
	// z.gfire.dev/gvx/runtime/egress parses them: allow=CIDR[:PORTS] or
	// deny=CIDR[:PORTS] (deny rules win). With none the guest reaches the
	// outside world only: never the host's loopback, link-local addresses
	// (cloud metadata), private ranges or the host's own addresses.
	// NetworkNAT only.
	Egress []string `json:"egress,omitempty"`
	// AllowHostPorts are the host's 127.0.0.1 ports (TCP and UDP) the
	// guest reaches as 10.0.2.2:PORT; none by default. NetworkNAT only.
	AllowHostPorts []int `json:"allow_host_ports,omitempty"`
	// NATMaxRelays bounds the host sockets a NAT guest holds at once (TCP
	// connections and UDP flows); 0 is the runtime's default (256).
	// NetworkNAT only.
	NATMaxRelays int `json:"nat_max_relays,omitempty"`

	// Limits bound what the episode costs the host.
	Limits Limits `json:"limits,omitzero"`

	// Privileged gives the guest every capability (of gVisor's Sentry, not
	// of the host) and a cgroup filesystem, as docker run --privileged,
	// for Docker inside the episode.
	Privileged bool `json:"privileged,omitempty"`
	// NetRaw allows raw sockets, AllowPacketSocketWrite writes on
	// AF_PACKET sockets, AllowSUID set-user-ID and set-group-ID bits.
	NetRaw                 bool `json:"net_raw,omitempty"`
	AllowPacketSocketWrite bool `json:"allow_packet_socket_write,omitempty"`
	AllowSUID              bool `json:"allow_suid,omitempty"`

	// Platform is gVisor's platform ("": PlatformSystrap, which needs no
	// /dev/kvm).
	Platform Platform `json:"platform,omitempty"`
	// Isolation is the host-side isolation mode ("": IsolationAuto).
	Isolation Isolation `json:"isolation,omitempty"`
	// Lockdown says whether the host process that runs this episode, and
	// nothing else, locks itself down once the episode has started ("":
	// LockdownFull). The episode's supervisor and init lock themselves
	// down whatever it says.
	Lockdown LockdownMode `json:"lockdown,omitempty"`
}

// New returns a Spec of this Version for image, every other field at its
// default.
func New(image string) *Spec { return &Spec{Version: Version, Image: image} }

// Clone returns a deep copy of s: appending to the copy's slices never
// changes s.
func (s *Spec) Clone() *Spec {
	c := *s
	if s.Entrypoint != nil {
		c.Entrypoint = append([]string{}, s.Entrypoint...)
	}
	c.Args = slices.Clone(s.Args)
	c.Env = slices.Clone(s.Env)
	c.Mounts = slices.Clone(s.Mounts)
	c.Ports = slices.Clone(s.Ports)
	c.Egress = slices.Clone(s.Egress)
	c.AllowHostPorts = slices.Clone(s.AllowHostPorts)
	return &c
}

// AbsPaths makes the host paths of s (mount sources, published sockets)
// absolute, relative to the working directory: what a front does with the
// paths its user gave before the spec leaves the process.
func (s *Spec) AbsPaths() error {
	abs := func(field string, p *string) error {
		if *p == "" || filepath.IsAbs(*p) {
			return nil
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			return &FieldError{Field: field, Err: fmt.Errorf("%q: %w", *p, err)}
		}
		*p = a
		return nil
	}
	for i := range s.Mounts {
		if err := abs(fmt.Sprintf("mounts[%d].source", i), &s.Mounts[i].Source); err != nil {
			return err
		}
	}
	for i := range s.Ports {
		if err := abs(fmt.Sprintf("ports[%d].host_socket", i), &s.Ports[i].HostSocket); err != nil {
			return err
		}
	}
	return nil
}

// MountType is the kind of a Mount.
type MountType string

// Mount types.
const (
	// MountVolume is an ext4 volume file served by ext4lite: guest writes
	// land in that one host file.
	MountVolume MountType = "volume"
	// MountBind is a host directory.
	MountBind MountType = "bind"
	// MountTmpfs is an empty in-memory filesystem.
	MountTmpfs MountType = "tmpfs"
)

// Mount is one filesystem mounted into the guest.
type Mount struct {
	Type MountType `json:"type"`
	// Source is the absolute host path of the volume file or directory;
	// empty for tmpfs.
	Source string `json:"source,omitempty"`
	// Target is the absolute guest path.
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly,omitempty"`
	// Size is the size of the volume the runner creates when Source does
	// not exist (0: 32 GiB, sparse). Volumes only.
	Size int64 `json:"size,omitempty"`
	// AllowForeignOwner lets a volume file owned by another uid than the
	// runner's be mounted. Volumes only.
	AllowForeignOwner bool `json:"allow_foreign,omitempty"`
	// MaxOpen bounds the files (and directories) the guest may hold open
	// on the volume at once (0: 65536); past it, opens fail with ENFILE.
	// Volumes only.
	MaxOpen int64 `json:"max_open,omitempty"`
	// Durability says what a guest fsync on the volume guarantees:
	// DurabilityFull ("" too) commits the volume's journal and flushes
	// the volume file to the host's disk; DurabilityEpisode commits the
	// journal to the volume file but skips the host flush, so a killed
	// sandbox still leaves a volume holding everything the guest synced
	// (the host's page cache keeps it) and only a host crash can lose it.
	// For volumes that die with the episode; not with ReadOnly. Volumes
	// only.
	Durability Durability `json:"durability,omitempty"`
}

// Durability is what a guest fsync on a volume guarantees (Mount.Durability).
type Durability string

// Durabilities.
const (
	// DurabilityFull: a guest fsync reaches the host's disk (the default).
	DurabilityFull Durability = "full"
	// DurabilityEpisode: a guest fsync survives a killed sandbox, not a
	// host crash.
	DurabilityEpisode Durability = "episode"
)

// Port publishes GuestPort (TCP, in the guest) on the host: as the unix
// socket HostSocket (an absolute path the runner creates, mode 0600), or
// on the TCP address HostAddr ("127.0.0.1:8080"). Exactly one of the two.
type Port struct {
	HostSocket string `json:"host_socket,omitempty"`
	HostAddr   string `json:"host_addr,omitempty"`
	GuestPort  int    `json:"guest_port"`
}

// Limits bound what the episode costs the host, and shape what the guest
// sees. Zero means the host's (no limit), except Pids.
type Limits struct {
	// MemoryBytes is the memory the guest sees and may use.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUs is the CPU time the guest gets, in CPUs (1.5: one and a half).
	CPUs float64 `json:"cpus,omitempty"`
	// Pids bounds the episode's host tasks (processes and threads): 0 is
	// the runtime's default (4096), -1 no limit.
	Pids int `json:"pids,omitempty"`
	// Policy says what happens when MemoryBytes or CPUs cannot be
	// enforced on the host ("": LimitsStrict).
	Policy LimitsPolicy `json:"policy,omitempty"`
}

// NetworkMode selects the guest's network.
type NetworkMode string

// Network modes.
const (
	// NetworkNone gives the guest a loopback interface only.
	NetworkNone NetworkMode = "none"
	// NetworkNAT gives the guest slirp's layout (eth0 10.0.2.15/24,
	// gateway 10.0.2.2 = the host's 127.0.0.1 on AllowHostPorts only, DNS
	// 10.0.2.3 = the host's nameserver) with outbound TCP and UDP made by
	// the host process's own sockets, to the destinations Egress allows.
	NetworkNAT NetworkMode = "nat"
)

// PullPolicy says when an image named by a registry reference is fetched
// from its registry rather than taken from the image cache, as docker run
// --pull does.
type PullPolicy string

// Pull policies.
const (
	// PullMissing (the default, "") uses a name the cache knows (a local
	// tag, or an image pulled before) and pulls only when it does not.
	PullMissing PullPolicy = "missing"
	// PullAlways fetches from the registry every time.
	PullAlways PullPolicy = "always"
	// PullNever never touches the network: a name the cache does not know
	// is an error.
	PullNever PullPolicy = "never"
)

// LimitsPolicy says what happens when a limit cannot be enforced on the
// host.
type LimitsPolicy string

// Limits policies.
const (
	// LimitsStrict (the default) refuses an episode whose memory or CPU
	// limit nothing on the host would enforce (no cgroup may be made: not
	// root, no delegated cgroup v2 subtree).
	LimitsStrict LimitsPolicy = "strict"
	// LimitsBestEffort starts it anyway, with the Sentry's own shaping
	// (what the guest sees) as the only bound, and says so.
	LimitsBestEffort LimitsPolicy = "best-effort"
)

// Platform is how gVisor's Sentry intercepts the guest's system calls.
type Platform string

// Platforms.
const (
	PlatformSystrap Platform = "systrap"
	PlatformPtrace  Platform = "ptrace"
	PlatformKVM     Platform = "kvm"
)

// Isolation selects the walls built around the Sentry on the host, beyond
// gVisor's own (the Sentry's seccomp filters and its platform).
type Isolation string

// Isolation modes.
const (
	// IsolationAuto (the default, "") uses the strongest mode the host
	// allows: IsolationNamespaces where user namespaces can be made,
	// otherwise IsolationSeccompOnly.
	IsolationAuto Isolation = "auto"
	// IsolationNamespaces runs the sandbox in user, network and PID
	// namespaces of the episode's own, with a /proc of its own.
	IsolationNamespaces Isolation = "namespaces"
	// IsolationSeccompOnly makes no namespace: for hosts that refuse them
	// (an unprivileged container or Kubernetes pod, a gVisor sandbox).
	IsolationSeccompOnly Isolation = "seccomp-only"
)

// LockdownMode says whether the host process running an episode locks
// itself down.
type LockdownMode string

// Lockdown modes.
const (
	// LockdownFull (the default, "") drops every capability, makes the
	// process not dumpable, sets no_new_privs and installs a seccomp
	// allowlist (and Landlock) once the episode has started: right for a
	// process that runs this one episode (rungv run).
	LockdownFull LockdownMode = "full"
	// LockdownOff leaves the runner's process as it is: for a program
	// that runs episodes in its own process, or to debug the host side.
	// The supervisor and init still lock themselves down.
	LockdownOff LockdownMode = "off"
)
