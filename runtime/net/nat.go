package episodenet

import "z.gfire.dev/gvx/runtime/egress"

// NATConfig is what the spec sets of the NAT's host side (spec.Spec's
// Egress, AllowHostPorts and NATMaxRelays); the runtime fills it in from
// its plan.
type NATConfig struct {
	// Rules are the egress rules (egress.ParseRule of spec.Spec.Egress).
	Rules []egress.Rule
	// HostPorts are the host's 127.0.0.1 ports the guest may reach as
	// 10.0.2.2 (egress.CheckHostPort).
	HostPorts []int
	// MaxRelays bounds the host sockets the guest can hold open; 0:
	// DefaultMaxRelays.
	MaxRelays int
}

// DefaultMaxRelays is NATConfig.MaxRelays's default (spec.Spec.NATMaxRelays).
const DefaultMaxRelays = 256

// ConfigError is a NATConfig or an environment (GVX_NAT_DNS) the NAT
// refuses: the caller's mistake, not the host's.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
