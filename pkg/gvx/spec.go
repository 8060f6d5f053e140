package gvx

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"z.gfire.dev/gvx/spec"
)

// Spec returns the episode spec c describes (package
// z.gfire.dev/gvx/spec), validated: what New hands to rungv. Host paths
// are made absolute. Errors name the Config field ("gvx: Config.Mounts[0].GuestPath: …").
//
// Beyond what the seeds' Config says, the spec has rungv run's defaults:
// the guest is privileged (every capability of the Sentry, not of the
// host: what docker:dind needs), the image is pulled only when missing
// from the cache, the isolation is the strongest the host allows, and the
// limits are strict. NewFromSpec runs a spec with any of them changed.
func (c *Config) Spec() (*spec.Spec, error) {
	if c.OCIImage == "" {
		return nil, errors.New("gvx: Config.OCIImage is empty")
	}
	s := spec.New(c.OCIImage)
	switch c.NetworkMode {
	case NetModeNone:
		s.Network = spec.NetworkNone
	case NetModeNAT:
		s.Network = spec.NetworkNAT
	default:
		return nil, fmt.Errorf("gvx: Config.NetworkMode: unknown NetworkMode %d", int(c.NetworkMode))
	}
	s.Platform = spec.Platform(c.Platform)
	s.NetRaw, s.AllowPacketSocketWrite, s.AllowSUID = c.NetRaw, c.AllowPacketSocketWrite, c.AllowSUID
	s.Privileged = true
	if c.EntrypointSet {
		s.Entrypoint = append([]string{}, c.Entrypoint...)
	}
	s.Args = append(s.Args, c.Cmd...)
	s.Env = append(s.Env, c.Envv...)
	s.Workdir, s.User = c.Workdir, c.User
	for i, m := range c.Mounts {
		sm := spec.Mount{Source: m.ImagePath, Target: m.GuestPath, ReadOnly: m.ReadOnly}
		switch m.Kind {
		case MountVolume:
			sm.Type = spec.MountVolume
		case MountBind:
			sm.Type = spec.MountBind
		case MountTmpfs:
			sm.Type = spec.MountTmpfs
		default:
			return nil, fmt.Errorf("gvx: Config.Mounts[%d].Kind: unknown MountKind %d", i, int(m.Kind))
		}
		s.Mounts = append(s.Mounts, sm)
	}
	for _, p := range c.Ports {
		s.Ports = append(s.Ports, spec.Port{HostSocket: p.HostSocket, HostAddr: p.HostAddr, GuestPort: p.GuestPort})
	}
	s.Egress = append(s.Egress, c.Egress...)
	s.AllowHostPorts = append(s.AllowHostPorts, c.AllowHostPorts...)
	s.NATMaxRelays = c.NATMaxRelays
	r := c.Resources
	s.Limits = spec.Limits{MemoryBytes: r.MemoryBytes, CPUs: float64(r.CPUMillis) / 1000, Pids: max(r.PidsLimit, -1)}
	if r.BestEffort {
		s.Limits.Policy = spec.LimitsBestEffort
	}
	if err := s.AbsPaths(); err != nil {
		return nil, fmt.Errorf("gvx: %w", spec.Rename(err, configField))
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("gvx: %w", spec.Rename(err, configField))
	}
	return s, nil
}

// configFields names the Config field behind each field of the spec.
var configFields = map[string]string{
	"image": "OCIImage", "args": "Cmd", "env": "Envv", "entrypoint": "Entrypoint", "workdir": "Workdir",
	"user": "User", "mounts": "Mounts", "type": "Kind", "source": "ImagePath", "target": "GuestPath",
	"ports": "Ports", "host_socket": "HostSocket", "host_addr": "HostAddr", "guest_port": "GuestPort",
	"network": "NetworkMode", "egress": "Egress", "allow_host_ports": "AllowHostPorts",
	"nat_max_relays": "NATMaxRelays", "platform": "Platform", "limits": "Resources",
	"memory_bytes": "MemoryBytes", "cpus": "CPUMillis", "pids": "PidsLimit",
}

// configField turns a spec field path ("mounts[0].target") into the
// Config's ("Config.Mounts[0].GuestPath").
func configField(field string) string {
	parts := strings.Split(field, ".")
	for i, p := range parts {
		name, index, _ := strings.Cut(p, "[")
		if n, ok := configFields[name]; ok {
			name = n
		}
		if index != "" {
			name += "[" + index
		}
		parts[i] = name
	}
	return "Config." + strings.Join(parts, ".")
}

// onlyProcess reports whether cfg sets nothing but the fields that say how
// rungv runs (Rungv, HostCPUs, Stdin, Stdout, Stderr): with a whole spec,
// the episode's own fields would be ignored.
func onlyProcess(cfg Config) error {
	cfg.Rungv, cfg.HostCPUs, cfg.Stdin, cfg.Stdout, cfg.Stderr = "", nil, nil, nil, nil
	if !reflect.ValueOf(cfg).IsZero() {
		return errors.New("gvx: with a whole spec, Config may set only Rungv, HostCPUs, Stdin, Stdout and Stderr (the episode is the spec's)")
	}
	return nil
}
