package runtime

import (
	"errors"
	"reflect"
	"testing"

	"z.gfire.dev/gvx/spec"
)

// TestNewPlan: the plan takes the spec as it is (validated, copied), fills
// in the defaults the spec leaves to the runtime, and refuses an invalid
// spec with the error naming the field.
func TestNewPlan(t *testing.T) {
	s := &spec.Spec{
		Version:    spec.Version,
		Image:      "oci:/img",
		Entrypoint: []string{"sh", "-c"},
		Mounts:     []spec.Mount{{Type: spec.MountVolume, Source: "/a,b=c.ext4", Target: "/d", MaxOpen: 9}},
		Ports:      []spec.Port{{HostSocket: "/run/s.sock", GuestPort: 2375}},
		Network:    spec.NetworkNAT,
		Egress:     []string{"allow=10.1.2.3:443"},
		Limits:     spec.Limits{Pids: 100, Policy: spec.LimitsBestEffort},
		Isolation:  spec.IsolationNamespaces,
	}
	p, err := newPlan(s, Host{CacheDir: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if p.network != NetworkNAT || p.isolation != IsolationNamespaces || !p.lockdown || len(p.egress) != 1 ||
		p.egress[0].String() != "allow=10.1.2.3:443" || p.pidsLimit() != 100 || p.limitsPolicy() != LimitsBestEffort ||
		p.host.CacheDir != "/c" || !reflect.DeepEqual(p.spec.Ports, []spec.Port{{HostSocket: "/run/s.sock", GuestPort: 2375}}) {
		t.Errorf("plan: %+v", p)
	}
	// The plan holds a copy: the caller may reuse its spec.
	s.Mounts[0].Target = "/x"
	if p.spec.Mounts[0].Target != "/d" {
		t.Error("the plan shares the caller's mounts")
	}

	// Defaults: no network, strict limits, the default pids limit; and
	// LockdownOff turns the caller's lockdown off.
	p, err = newPlan(&spec.Spec{Version: spec.Version, Image: "oci:/img", Lockdown: spec.LockdownOff, Isolation: spec.IsolationSeccompOnly}, Host{})
	if err != nil || p.network != NetworkNone || p.limitsPolicy() != LimitsStrict || p.pidsLimit() != DefaultPidsLimit || p.lockdown {
		t.Errorf("defaults: %+v, %v", p, err)
	}

	// An invalid spec: the error names the spec's field.
	_, err = newPlan(&spec.Spec{Version: spec.Version, Image: "oci:/img", Egress: []string{"allow=10.0.0.0/8"}}, Host{})
	var fe *spec.FieldError
	if !errors.Is(err, spec.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "egress" {
		t.Errorf("egress without nat: %v", err)
	}
	if _, err := newPlan(nil, Host{}); err == nil {
		t.Error("a nil spec was taken")
	}
	// Checkpoint and restore are the seccomp-only path's.
	if _, err := newPlan(&spec.Spec{Version: spec.Version, Image: "oci:/img", Isolation: spec.IsolationNamespaces}, Host{RestoreFrom: "/ck"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("restore with namespaces: %v", err)
	}
}

// TestHostIsNotTheSpec: Host carries only what the episode's description
// does not; a field of both would be two answers to one question.
func TestHostIsNotTheSpec(t *testing.T) {
	specFields := map[string]bool{}
	st := reflect.TypeFor[spec.Spec]()
	for i := range st.NumField() {
		specFields[st.Field(i).Name] = true
	}
	ht := reflect.TypeFor[Host]()
	for i := range ht.NumField() {
		if n := ht.Field(i).Name; specFields[n] {
			t.Errorf("Host.%s is also spec.Spec.%s", n, n)
		}
	}
}
