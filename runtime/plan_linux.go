package runtime

import (
	"fmt"
	"time"

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
}

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
	if (h.CheckpointDir != "" || h.RestoreFrom != "") && p.isolation != IsolationSeccompOnly {
		return nil, fmt.Errorf("%w: checkpoint and restore need --isolation seccomp-only (rungv serves the volumes and drives the Sentry itself there; runsc's own restore refuses --rootless, which the namespaced path uses for volumes: docs/runtime.md, \"Checkpoint, restore, fork\")", ErrUnsupported)
	}
	return p, nil
}

// ports are the spec's published ports as the publisher takes them.
func (p *plan) ports() []Port {
	var out []Port
	for _, sp := range p.spec.Ports {
		out = append(out, Port{HostSocket: sp.HostSocket, HostAddr: sp.HostAddr, GuestPort: sp.GuestPort})
	}
	return out
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
	case p.host.StopTimeout < 0:
		return 0
	case p.host.StopTimeout == 0:
		return StopTimeout
	}
	return p.host.StopTimeout
}
