package spec

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path"
	"strconv"
	"strings"

	"z.gfire.dev/gvx/runtime/egress"
)

// ErrInvalid is what every error of Validate, Parse and the Parse*
// functions unwraps to.
var ErrInvalid = errors.New("invalid episode spec")

// MaxVolumeSize is the largest Mount.Size (1 PiB).
const MaxVolumeSize = 1 << 50

// FieldError is one invalid field: Field is its JSON path
// ("mounts[1].target", "limits.cpus"), Err what is wrong and what is
// wanted.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns ErrInvalid and Err.
func (e *FieldError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// Rename returns err with the Field of each *FieldError in it (err itself,
// or one that errors.Join joined) replaced by name(Field): the name a front
// gives the field, a flag (--mount) or a Go field (Config.Mounts[0]).
// Other errors are returned as they are.
func Rename(err error, name func(field string) string) error {
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Field: name(fe.Field), Err: fe.Err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, x := range j.Unwrap() {
			out = append(out, Rename(x, name))
		}
		return errors.Join(out...)
	}
	return err
}

// Validate checks every field of s and returns the problems found, each a
// *FieldError naming its field, joined (errors.Join); nil if s is valid.
// It is the one place the rules live: the SDK, rungv run (its flags, or
// --spec) and rungv pool all validate through it.
func (s *Spec) Validate() error {
	v := &validator{}
	if s.Version != Version {
		v.bad("version", "%d is not supported: want %d (this build reads version %d only)", s.Version, Version, Version)
	}
	if s.Image == "" {
		v.bad("image", "is empty: name an image (oci:DIR, docker-archive:TAR, or a name)")
	}
	v.text("image", s.Image)
	oneOf(v, "pull", s.Pull, PullMissing, PullAlways, PullNever)
	for i, a := range s.Entrypoint {
		v.text(fmt.Sprintf("entrypoint[%d]", i), a)
	}
	for i, a := range s.Args {
		v.text(fmt.Sprintf("args[%d]", i), a)
	}
	for i, kv := range s.Env {
		f := fmt.Sprintf("env[%d]", i)
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			v.bad(f, "%q is not KEY=VALUE", kv)
		}
		v.text(f, kv)
	}
	v.text("user", s.User)
	if s.Workdir != "" && !path.IsAbs(s.Workdir) {
		v.bad("workdir", "%q is not an absolute guest path", s.Workdir)
	}
	v.text("workdir", s.Workdir)
	targets := map[string]int{}
	for i := range s.Mounts {
		v.mount(i, &s.Mounts[i], targets)
	}
	for i, p := range s.Ports {
		v.port(i, p)
	}
	v.network(s)
	v.limits(s.Limits)
	oneOf(v, "platform", s.Platform, PlatformSystrap, PlatformPtrace, PlatformKVM)
	oneOf(v, "isolation", s.Isolation, IsolationAuto, IsolationNamespaces, IsolationSeccompOnly)
	oneOf(v, "lockdown", s.Lockdown, LockdownFull, LockdownOff)
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) bad(field, format string, a ...any) {
	v.wrap(field, fmt.Errorf(format, a...))
}

func (v *validator) wrap(field string, err error) {
	v.errs = append(v.errs, &FieldError{Field: field, Err: err})
}

// text refuses a NUL byte, which no argument, path or name can carry.
func (v *validator) text(field, s string) {
	if strings.IndexByte(s, 0) >= 0 {
		v.bad(field, "contains a NUL byte")
	}
}

// oneOf checks an enumerated field; "" is always its default.
func oneOf[T ~string](v *validator, field string, got T, want ...T) {
	if got == "" {
		return
	}
	var names []string
	for _, w := range want {
		if got == w {
			return
		}
		names = append(names, string(w))
	}
	v.bad(field, "%q: want %s", got, orList(names))
}

func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (v *validator) mount(i int, m *Mount, targets map[string]int) {
	f := fmt.Sprintf("mounts[%d]", i)
	switch m.Type {
	case MountVolume, MountBind:
		if m.Source == "" {
			v.bad(f+".source", "is empty: a %s mount needs the host path of its %s", m.Type, map[MountType]string{MountVolume: "volume file", MountBind: "directory"}[m.Type])
		} else if !path.IsAbs(m.Source) {
			v.bad(f+".source", "%q is not an absolute host path", m.Source)
		}
	case MountTmpfs:
		if m.Source != "" {
			v.bad(f+".source", "a tmpfs mount takes no source")
		}
	case "":
		v.bad(f+".type", "is empty: want volume, bind or tmpfs")
	default:
		v.bad(f+".type", "%q: want volume, bind or tmpfs", m.Type)
	}
	v.text(f+".source", m.Source)
	v.text(f+".target", m.Target)
	switch {
	case !path.IsAbs(m.Target):
		v.bad(f+".target", "%q is not an absolute guest path", m.Target)
	case path.Clean(m.Target) == "/":
		v.bad(f+".target", "cannot mount over the guest's /")
	default:
		t := path.Clean(m.Target)
		if j, dup := targets[t]; dup {
			v.bad(f+".target", "%s is mounted already by mounts[%d]", t, j)
		}
		targets[t] = i
	}
	if m.Type != MountVolume && (m.Size != 0 || m.MaxOpen != 0 || m.AllowForeignOwner) {
		v.bad(f, "size, max_open and allow_foreign are for volumes")
	}
	if m.Size < 0 || m.Size > MaxVolumeSize {
		v.bad(f+".size", "%d: want 0 (32 GiB) up to %d (1 PiB)", m.Size, int64(MaxVolumeSize))
	}
	if m.MaxOpen < 0 {
		v.bad(f+".max_open", "%d: want a positive number (0: 65536)", m.MaxOpen)
	}
	switch m.Durability {
	case "", DurabilityFull:
	case DurabilityEpisode:
		if m.Type != MountVolume {
			v.bad(f+".durability", "is for volumes")
		} else if m.ReadOnly {
			v.bad(f+".durability", "episode is for volumes the guest writes: a read-only mount syncs nothing")
		}
	default:
		v.bad(f+".durability", "%q: want full (the default) or episode", m.Durability)
	}
}

func (v *validator) port(i int, p Port) {
	f := fmt.Sprintf("ports[%d]", i)
	if (p.HostSocket == "") == (p.HostAddr == "") {
		v.bad(f, "want one of host_socket and host_addr")
	}
	if p.HostSocket != "" && !path.IsAbs(p.HostSocket) {
		v.bad(f+".host_socket", "%q is not an absolute host path", p.HostSocket)
	}
	v.text(f+".host_socket", p.HostSocket)
	if p.HostAddr != "" {
		h, pt, err := net.SplitHostPort(p.HostAddr)
		n, perr := strconv.Atoi(pt)
		if err != nil || net.ParseIP(h) == nil || perr != nil || n < 0 || n > 65535 {
			v.bad(f+".host_addr", "%q: want IP:PORT (an IP literal, [IPv6]:PORT, port 0 to 65535)", p.HostAddr)
		}
	}
	if p.GuestPort < 1 || p.GuestPort > 65535 {
		v.bad(f+".guest_port", "%d: want 1 to 65535", p.GuestPort)
	}
}

func (v *validator) network(s *Spec) {
	oneOf(v, "network", s.Network, NetworkNone, NetworkNAT)
	if s.Network != NetworkNAT {
		for _, f := range []struct {
			name string
			set  bool
		}{{"egress", len(s.Egress) > 0}, {"allow_host_ports", len(s.AllowHostPorts) > 0}, {"nat_max_relays", s.NATMaxRelays != 0}} {
			if f.set {
				v.bad(f.name, "needs network nat")
			}
		}
	}
	for i, r := range s.Egress {
		if _, err := egress.ParseRule(r); err != nil {
			v.wrap(fmt.Sprintf("egress[%d]", i), err)
		}
	}
	for i, p := range s.AllowHostPorts {
		if err := egress.CheckHostPort(p); err != nil {
			v.wrap(fmt.Sprintf("allow_host_ports[%d]", i), err)
		}
	}
	if s.NATMaxRelays < 0 {
		v.bad("nat_max_relays", "%d: want a positive number (0: the default, 256)", s.NATMaxRelays)
	}
}

func (v *validator) limits(l Limits) {
	if l.MemoryBytes < 0 {
		v.bad("limits.memory_bytes", "%d: want a positive number of bytes (0: no limit)", l.MemoryBytes)
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
		v.bad("limits.cpus", "%v: want a positive number of CPUs (0: no limit)", l.CPUs)
	}
	if l.Pids < -1 {
		v.bad("limits.pids", "%d: want a positive limit, 0 (the default, 4096) or -1 (none)", l.Pids)
	}
	oneOf(v, "limits.policy", l.Policy, LimitsStrict, LimitsBestEffort)
}
