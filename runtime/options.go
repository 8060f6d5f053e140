package runtime

import (
	"errors"
	"fmt"
	"io"
	"strings"
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

// NetworkMode selects the guest's network.
type NetworkMode string

// Network modes.
const (
	// NetworkNone gives the guest a loopback interface only.
	NetworkNone NetworkMode = "none"
	// NetworkNAT gives the guest slirp's layout (eth0 10.0.2.15/24,
	// gateway 10.0.2.2 = the host's 127.0.0.1, DNS 10.0.2.3 = the host's
	// nameserver) with outbound TCP and UDP made by the host process's own
	// sockets (runtime/nat_linux.go; docs/runtime.md "Networking").
	NetworkNAT NetworkMode = "nat"
)

// MountType is the kind of a Mount.
type MountType string

// Mount types.
const (
	// MountVolume is an ext4 volume file served by ext4lite.
	MountVolume MountType = "volume"
	// MountBind is a host directory.
	MountBind MountType = "bind"
	// MountTmpfs is an empty in-memory filesystem.
	MountTmpfs MountType = "tmpfs"
)

// Mount is one filesystem mounted into the guest.
type Mount struct {
	Type     MountType
	Source   string // host path (volume file or directory); empty for tmpfs
	Target   string // absolute guest path
	ReadOnly bool
	// Size is the size of the volume CreateMissingVolume makes when
	// Source does not exist (0: DefaultVolumeSize). Volumes only.
	Size int64
}

// ParseMount parses docker's --mount syntax:
// "type=volume,src=FILE,dst=PATH[,readonly]".
func ParseMount(s string) (Mount, error) {
	var m Mount
	for _, kv := range strings.Split(s, ",") {
		k, v, hasV := strings.Cut(kv, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "type":
			m.Type = MountType(v)
		case "src", "source":
			m.Source = v
		case "dst", "destination", "target":
			m.Target = v
		case "readonly", "ro":
			m.ReadOnly = !hasV || v == "true" || v == "1"
		case "size":
			n, err := parseVolumeSize(v)
			if err != nil {
				return m, fmt.Errorf("%w: --mount %q: size=: %v", ErrBadOption, s, err)
			}
			m.Size = n
		default:
			return m, fmt.Errorf("%w: --mount %q: unknown key %q", ErrBadOption, s, k)
		}
	}
	if m.Type == "" {
		m.Type = MountVolume
	}
	switch m.Type {
	case MountVolume, MountBind:
		if m.Source == "" {
			return m, fmt.Errorf("%w: --mount %q: missing src=", ErrBadOption, s)
		}
	case MountTmpfs:
		if m.Source != "" {
			return m, fmt.Errorf("%w: --mount %q: tmpfs takes no src=", ErrBadOption, s)
		}
	}
	if m.Size != 0 && m.Type != MountVolume {
		return m, fmt.Errorf("%w: --mount %q: size= is for volumes", ErrBadOption, s)
	}
	switch m.Type {
	case MountVolume, MountBind, MountTmpfs:
	default:
		return m, fmt.Errorf("%w: --mount %q: type must be volume, bind or tmpfs", ErrBadOption, s)
	}
	if !strings.HasPrefix(m.Target, "/") {
		return m, fmt.Errorf("%w: --mount %q: dst= must be an absolute path", ErrBadOption, s)
	}
	return m, nil
}

// StartInfo describes an episode as it starts.
type StartInfo struct {
	// Limits says who enforces MemoryBytes and CPUs: "sentry", or
	// "sentry + cgroup v1 (memory, cpu)" and the like; "" without limits.
	Limits string
}

// Options describe one episode, with docker run's meaning.
type Options struct {
	// Image names the image as package image takes it: oci:DIR[:REF],
	// docker-archive:TAR[:TAG], or a registry reference.
	Image string
	// Args replace the image's Cmd when not empty.
	Args []string
	// Entrypoint replaces the image's Entrypoint when EntrypointSet
	// (an empty Entrypoint then clears it), and drops the image's Cmd.
	Entrypoint    []string
	EntrypointSet bool
	// Env is KEY=VALUE pairs added to (and overriding) the image's Env.
	Env []string
	// Workdir replaces the image's WorkingDir; "" keeps it ("/" if none).
	Workdir string
	// User is "user[:group]", names or numbers; "" keeps the image's.
	User string
	// Network is NetworkNone when empty.
	Network NetworkMode
	Mounts  []Mount
	// Ports publishes guest TCP ports as host unix sockets.
	Ports []Port

	// Platform is runsc's platform (systrap, ptrace, kvm); "" picks
	// systrap, which needs no /dev/kvm.
	Platform string

	// MemoryBytes and CPUs shape what the guest sees (0: host's). The
	// Sentry always applies them; where the caller may create a child of
	// its own cgroup (root, or a delegated cgroup v2 subtree) the whole
	// episode also runs in a host cgroup with these limits, removed when
	// the episode ends.
	MemoryBytes int64
	CPUs        float64
	// OnStart, when set, is called once the episode is about to start.
	OnStart func(StartInfo)

	// Privileged gives the guest every capability and a cgroup filesystem
	// at /sys/fs/cgroup, as docker run --privileged, for Docker-in-the-
	// episode. They are the Sentry's capabilities: the sandbox, not the
	// host kernel, enforces them, and the host process stays unprivileged
	// and locked down.
	Privileged bool

	// NetRaw allows raw sockets, AllowPacketSocketWrite writes on
	// AF_PACKET sockets, AllowSUID set-user-ID binaries (as docker does).
	NetRaw, AllowPacketSocketWrite, AllowSUID bool

	// Stdin, Stdout, Stderr default to the process's own.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// CacheDir is the image cache (package erofs/cache); "" means
	// image.DefaultCacheDir. An unwritable cache falls back to one in the
	// episode's scratch directory.
	CacheDir string
	// DebugLogDir, when set, receives runsc's debug logs.
	DebugLogDir string
	// Lockdown locks the calling process down (Lockdown, or LockdownNAT
	// with NetworkNAT: every capability dropped, not dumpable,
	// no_new_privs, a seccomp allowlist) once the episode is started:
	// for a process that exists only to run one episode (the rungv CLI),
	// never for a library user. The supervisor and init lock themselves
	// down in any case.
	Lockdown bool
}
