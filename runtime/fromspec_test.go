package runtime

import (
	"errors"
	"reflect"
	"testing"

	"z.gfire.dev/gvx/spec"
)

// TestOptionsFromSpec: every field of a spec lands in Options, and every
// Options field that is not the host side's own is set by some field of
// the spec.
func TestOptionsFromSpec(t *testing.T) {
	s := &spec.Spec{
		Version:    spec.Version,
		Image:      "oci:/img",
		Pull:       spec.PullNever,
		Entrypoint: []string{"sh", "-c"},
		Args:       []string{"echo hi"},
		Env:        []string{"A=1"},
		User:       "1:2",
		Workdir:    "/w",
		Mounts: []spec.Mount{{Type: spec.MountVolume, Source: "/a,b=c.ext4", Target: "/d", Size: 1 << 30, MaxOpen: 9, AllowForeignOwner: true},
			{Type: spec.MountTmpfs, Target: "/t"}},
		Ports:                  []spec.Port{{HostSocket: "/run/s.sock", GuestPort: 2375}},
		Network:                spec.NetworkNAT,
		Egress:                 []string{"allow=10.1.2.3:443"},
		AllowHostPorts:         []int{5000},
		NATMaxRelays:           7,
		Limits:                 spec.Limits{MemoryBytes: 1 << 30, CPUs: 1.5, Pids: 100, Policy: spec.LimitsBestEffort},
		Privileged:             true,
		NetRaw:                 true,
		AllowPacketSocketWrite: true,
		AllowSUID:              true,
		Platform:               spec.PlatformPtrace,
		Isolation:              spec.IsolationNamespaces,
	}
	o, err := OptionsFromSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	hostSide := map[string]bool{"Stdin": true, "Stdout": true, "Stderr": true, "CacheDir": true, "DebugLogDir": true, "OnStart": true,
		"CheckpointDir": true, "RestoreFrom": true, "Control": true} // rungv run's own flags, not the episode's
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !hostSide[name] && v.Field(i).IsZero() {
			t.Errorf("Options.%s is not set from the spec", name)
		}
	}
	if !reflect.DeepEqual(o.Mounts, s.Mounts) || o.Ports[0] != (Port{HostSocket: "/run/s.sock", GuestPort: 2375}) ||
		o.Egress[0].String() != "allow=10.1.2.3:443" || !o.EntrypointSet || o.Entrypoint[1] != "-c" ||
		o.CPUs != 1.5 || o.PidsLimit != 100 || o.Limits != LimitsBestEffort || o.Platform != "ptrace" || !o.Lockdown {
		t.Errorf("converted: %+v", o)
	}
	// The conversion copies: editing the Options leaves the spec alone.
	o.Mounts[0].Target = "/x"
	if s.Mounts[0].Target != "/d" {
		t.Error("Options share the spec's Mounts")
	}

	// Defaults: no entrypoint override, no network, strict limits; and
	// LockdownOff turns the caller's lockdown off.
	o, err = OptionsFromSpec(&spec.Spec{Version: spec.Version, Image: "oci:/img", Lockdown: spec.LockdownOff})
	if err != nil || o.EntrypointSet || o.Network != NetworkNone || o.Limits != LimitsStrict || o.Lockdown {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, err = OptionsFromSpec(&spec.Spec{Version: spec.Version, Image: "oci:/img", Entrypoint: []string{}})
	if err != nil || !o.EntrypointSet || len(o.Entrypoint) != 0 {
		t.Errorf("cleared entrypoint: %+v, %v", o, err)
	}
	if _, err := OptionsFromSpec(&spec.Spec{Version: spec.Version}); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("an invalid spec: %v", err)
	}
}
