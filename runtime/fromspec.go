package runtime

import (
	"slices"

	"z.gfire.dev/gvx/runtime/egress"
	"z.gfire.dev/gvx/spec"
)

// OptionsFromSpec validates s and returns the Options of the episode it
// describes: the one conversion from the episode spec (what the SDK, rungv
// run's flags and --spec, and rungv pool all build) to what Run takes.
//
// The host side's own settings are the caller's to add: Stdin, Stdout,
// Stderr, CacheDir, DebugLogDir and OnStart. Options.Lockdown follows
// s.Lockdown, on unless spec.LockdownOff: right for a process that exists
// to run this one episode (rungv run); a program that runs episodes in its
// own process sets it false.
func OptionsFromSpec(s *spec.Spec) (Options, error) {
	if err := s.Validate(); err != nil {
		return Options{}, err
	}
	o := Options{
		Image:                  s.Image,
		Pull:                   s.Pull,
		Args:                   slices.Clone(s.Args),
		Env:                    slices.Clone(s.Env),
		Workdir:                s.Workdir,
		User:                   s.User,
		Network:                s.Network,
		Mounts:                 slices.Clone(s.Mounts),
		AllowHostPorts:         slices.Clone(s.AllowHostPorts),
		NATMaxRelays:           s.NATMaxRelays,
		Isolation:              s.Isolation,
		Platform:               string(s.Platform),
		MemoryBytes:            s.Limits.MemoryBytes,
		CPUs:                   s.Limits.CPUs,
		PidsLimit:              s.Limits.Pids,
		Limits:                 s.Limits.Policy,
		Privileged:             s.Privileged,
		NetRaw:                 s.NetRaw,
		AllowPacketSocketWrite: s.AllowPacketSocketWrite,
		AllowSUID:              s.AllowSUID,
		Lockdown:               s.Lockdown != spec.LockdownOff,
	}
	if o.Network == "" {
		o.Network = NetworkNone
	}
	if o.Limits == "" {
		o.Limits = LimitsStrict
	}
	if s.Entrypoint != nil {
		o.EntrypointSet = true
		o.Entrypoint = slices.Clone(s.Entrypoint)
	}
	for _, r := range s.Egress {
		rule, err := egress.ParseRule(r) // Validate parsed it already
		if err != nil {
			return Options{}, err
		}
		o.Egress = append(o.Egress, rule)
	}
	for _, p := range s.Ports {
		o.Ports = append(o.Ports, Port{HostSocket: p.HostSocket, HostAddr: p.HostAddr, GuestPort: p.GuestPort})
	}
	return o, nil
}
