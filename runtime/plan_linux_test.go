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

// TestProfileFlags: Host.ProfileDir turns on runsc's profiler (the path
// in the namespaced mode, where runsc opens it; a descriptor in the
// seccomp-only one) and nothing else; an at-once stop of a profiled
// episode still kills the guest through the Sentry (a grace above 0), or
// the killed sandbox would write no profile; without ProfileDir it stays
// at once.
func TestProfileFlags(t *testing.T) {
	s := &spec.Spec{Version: spec.Version, Image: "oci:/img", Isolation: spec.IsolationNamespaces}
	for _, iso := range []spec.Isolation{spec.IsolationNamespaces, spec.IsolationSeccompOnly} {
		s.Isolation = iso
		p, err := newPlan(s, Host{StopTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		p.id = "abc"
		for _, a := range p.runscGlobals() {
			if len(a) >= 9 && a[:9] == "--profile" {
				t.Fatalf("%s: no ProfileDir, yet runsc gets %s", iso, a)
			}
		}
		if g := p.stopGrace(); g != 0 {
			t.Fatalf("%s: an at-once stop without ProfileDir has grace %v, want 0", iso, g)
		}
		p.host.ProfileDir = "/prof"
		got := map[string]bool{}
		for _, a := range p.runscGlobals() {
			got[a] = true
		}
		wantPath := iso == spec.IsolationNamespaces
		if !got["--profile"] || got["--profile-cpu=/prof/abc.cpu.pprof"] != wantPath {
			t.Fatalf("%s: runsc flags %v; want --profile and (namespaced only) --profile-cpu=/prof/abc.cpu.pprof", iso, p.runscGlobals())
		}
		if g := p.stopGrace(); g <= 0 {
			t.Fatalf("%s: an at-once stop of a profiled episode has grace %v: the sandbox would be killed before writing its profile", iso, g)
		}
	}
}

// TestVolumeDentryCache: a volume's mount caches 16,384 dentries by
// default and never more than a quarter of its max-open (each cached
// dentry may hold two FDs on the server), at least one; the effect inside
// an episode is cmd/rungv's TestVolumeDentryCache.
func TestVolumeDentryCache(t *testing.T) {
	for _, c := range []struct{ maxOpen, want int64 }{
		{0, 16384}, {1 << 16, 16384}, {1 << 20, 16384}, {2500, 625}, {400, 100}, {9, 2}, {1, 1},
	} {
		if got := volumeDentryCache(c.maxOpen); got != c.want {
			t.Errorf("volumeDentryCache(%d) = %d, want %d", c.maxOpen, got, c.want)
		}
	}
}
