package runtime

import (
	"fmt"
	"os"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"z.gfire.dev/gvx/runtime/egress"
	"z.gfire.dev/gvx/spec"
)

// plan is one episode as this package carries it out: the spec that
// describes it (validated, a copy of the caller's), the host's side of it
// (Host), and what follows from both (the resolved network and isolation
// modes, the egress rules). Every stage of Run reads it; nothing turns it
// into flags or files and back.
type plan struct {
	spec *spec.Spec
	host Host

	network   NetworkMode // never ""
	isolation Isolation   // IsolationNamespaces or IsolationSeccompOnly
	egress    []egress.Rule
	// lockdown locks the calling process down once the episode runs
	// (spec.Spec.Lockdown is not LockdownOff).
	lockdown bool

	// What prepare adds: the episode's bundle and what the sandbox is
	// given. runsc's argv is made from these where runsc is started
	// (runscGlobals), and nowhere else.
	id, state string
	bundle    string      // state/bundle: config.json, an empty rootfs/, rootfs-upper.tar
	oci       *specs.Spec // the OCI spec the sandbox boots, as written to config.json
	ociJSON   []byte      // and its bytes (a checkpoint keeps them)
	rootfs    rootfsPlan
	volumes   []volumePlan // the spec's volume mounts, in order
	relay     string       // the relay's EROFS image (published ports), or ""
	sockets   socketFlags
}

// rootfsPlan is the guest's root filesystem: an EROFS image the Sentry
// opens itself, with a writable layer in memory.
type rootfsPlan struct {
	image    string // the EROFS file
	overlay  bool   // a writable layer in memory over it
	upperTar string // the first files of that layer (upper_linux.go), or ""
}

// volumePlan is one volume mount (spec.MountVolume) of the episode.
type volumePlan struct {
	field    string   // the spec's name of the mount ("mounts[2]"), for errors
	target   string   // guest path
	source   string   // the caller's path of the volume file
	bind     string   // where init binds the opened file (volumeBindPath), the OCI mount's source
	readOnly bool     //
	maxOpen  int64    // 0: volume.DefaultMaxOpen
	episode  bool     // durability=episode: guest fsyncs skip the host flush
	file     *os.File // the file openVolumes opened and locked; owned by Run
}

// socketFlags are the sandbox's socket permissions (sandboxSocketFlags).
type socketFlags struct{ netRaw, packetWrite bool }

// newPlan validates s (spec.Spec.Validate: every error names its field)
// and resolves what the spec leaves to the host: the isolation mode
// (IsolationAuto probes the host), the network's default.
func newPlan(s *spec.Spec, h Host) (*plan, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no spec", ErrBadOption)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p := &plan{spec: s.Clone(), host: h, network: s.Network, lockdown: s.Lockdown != spec.LockdownOff}
	if p.network == "" {
		p.network = NetworkNone
	}
	for i, r := range s.Egress {
		rule, err := egress.ParseRule(r) // Validate parsed it already
		if err != nil {
			return nil, &spec.FieldError{Field: fmt.Sprintf("egress[%d]", i), Err: err}
		}
		p.egress = append(p.egress, rule)
	}
	var err error
	if p.isolation, err = resolveIsolation(s.Isolation); err != nil {
		return nil, err
	}
	if err := checkNested(inGVisor()); err != nil {
		return nil, err
	}
	if (h.CheckpointDir != "" || h.RestoreFrom != "") && p.isolation != IsolationSeccompOnly {
		return nil, fmt.Errorf("%w: checkpoint and restore need --isolation seccomp-only (rungv serves the volumes and drives the Sentry itself there; runsc's own restore refuses --rootless, which the namespaced path uses for volumes: docs/runtime.md, \"Checkpoint, restore, fork\")", ErrUnsupported)
	}
	return p, nil
}

// pidsLimit is the spec's limits.pids with its default: 0 means
// DefaultPidsLimit; negative, none.
func (p *plan) pidsLimit() int {
	if n := p.spec.Limits.Pids; n != 0 {
		return n
	}
	return DefaultPidsLimit
}

// limitsPolicy is the spec's limits.policy with its default.
func (p *plan) limitsPolicy() LimitsPolicy {
	if p.spec.Limits.Policy == "" {
		return LimitsStrict
	}
	return p.spec.Limits.Policy
}

// stopGrace is the host's stop timeout as waitChild takes it.
func (p *plan) stopGrace() time.Duration {
	switch {
	case p.host.StopTimeout < 0 && p.host.ProfileDir != "":
		// Profiling: the guest is killed through the Sentry, which then
		// ends itself and writes the profile (a killed sandbox writes none).
		return time.Millisecond
	case p.host.StopTimeout < 0:
		return 0
	case p.host.StopTimeout == 0:
		return StopTimeout
	}
	return p.host.StopTimeout
}

// volumeAt is the plan's volume mounted at target.
func (p *plan) volumeAt(target string) (volumePlan, bool) {
	for _, v := range p.volumes {
		if v.target == target {
			return v, true
		}
	}
	return volumePlan{}, false
}

// mountField is the spec's name of the mount at target ("mounts[2]
// (/data)"), for errors; target alone when no mount of the spec is there.
func (p *plan) mountField(target string) string {
	for i, m := range p.spec.Mounts {
		if m.Target == target {
			return fmt.Sprintf("mounts[%d] (%s)", i, target)
		}
	}
	return target
}
