package gvx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"z.gfire.dev/gvx/spec"
)

// TestConfigSpec: every episode field of Config lands in the spec, host
// paths made absolute, with rungv run's defaults for what Config lacks.
func TestConfigSpec(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	c := Config{
		Platform: PlatformPtrace, NetworkMode: NetModeNAT, NetRaw: true, AllowPacketSocketWrite: true, AllowSUID: true,
		OCIImage: "docker:dind", Entrypoint: []string{"sh", "-c"}, EntrypointSet: true, Cmd: []string{"echo hi"},
		Envv: []string{"A=1"}, Workdir: "/w", User: "1:2",
		Mounts: []Mount{
			{Kind: MountVolume, ImagePath: "ep,1=x.ext4", GuestPath: "/var/lib/docker"},
			{Kind: MountBind, ImagePath: "/in", GuestPath: "/in", ReadOnly: true},
			{Kind: MountTmpfs, GuestPath: "/tmp"},
		},
		Resources: Resources{MemoryBytes: 4 << 30, CPUMillis: 1500, PidsLimit: -7, BestEffort: true},
		Ports:     []Port{{HostSocket: "d.sock", GuestPort: 2375}, {HostAddr: "127.0.0.1:8080", GuestPort: 80}},
		Egress:    []string{"allow=10.0.0.0/8"}, AllowHostPorts: []int{5000}, NATMaxRelays: 9,
	}
	got, err := c.Spec()
	if err != nil {
		t.Fatal(err)
	}
	want := &spec.Spec{
		Version: spec.Version, Image: "docker:dind", Entrypoint: []string{"sh", "-c"}, Args: []string{"echo hi"},
		Env: []string{"A=1"}, User: "1:2", Workdir: "/w",
		Mounts: []spec.Mount{
			{Type: spec.MountVolume, Source: filepath.Join(wd, "ep,1=x.ext4"), Target: "/var/lib/docker"},
			{Type: spec.MountBind, Source: "/in", Target: "/in", ReadOnly: true},
			{Type: spec.MountTmpfs, Target: "/tmp"},
		},
		Ports:   []spec.Port{{HostSocket: filepath.Join(wd, "d.sock"), GuestPort: 2375}, {HostAddr: "127.0.0.1:8080", GuestPort: 80}},
		Network: spec.NetworkNAT, Egress: []string{"allow=10.0.0.0/8"}, AllowHostPorts: []int{5000}, NATMaxRelays: 9,
		Limits:     spec.Limits{MemoryBytes: 4 << 30, CPUs: 1.5, Pids: -1, Policy: spec.LimitsBestEffort},
		Privileged: true, NetRaw: true, AllowPacketSocketWrite: true, AllowSUID: true, Platform: spec.PlatformPtrace,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Spec():\n got %#v\nwant %#v", got, want)
	}
	// No entrypoint override unless EntrypointSet; an empty one clears it.
	if s, _ := (&Config{OCIImage: "x", Entrypoint: []string{"ignored"}}).Spec(); s.Entrypoint != nil {
		t.Errorf("Entrypoint without EntrypointSet: %q", s.Entrypoint)
	}
	if s, _ := (&Config{OCIImage: "x", EntrypointSet: true}).Spec(); s.Entrypoint == nil || len(s.Entrypoint) != 0 {
		t.Errorf("EntrypointSet with none: %#v, want a cleared entrypoint", s.Entrypoint)
	}
}

func TestConfigSpecErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		says string
	}{
		{Config{}, "Config.OCIImage is empty"},
		{Config{OCIImage: "x", NetworkMode: 7}, "Config.NetworkMode: unknown NetworkMode 7"},
		{Config{OCIImage: "x", Mounts: []Mount{{Kind: 9, GuestPath: "/a"}}}, "Config.Mounts[0].Kind: unknown MountKind 9"},
		{Config{OCIImage: "x", Mounts: []Mount{{Kind: MountTmpfs, GuestPath: "/a"}, {Kind: MountTmpfs, GuestPath: "rel"}}}, "Config.Mounts[1].GuestPath:"},
		{Config{OCIImage: "x", Mounts: []Mount{{Kind: MountBind, GuestPath: "/a"}}}, "Config.Mounts[0].ImagePath: is empty"},
		{Config{OCIImage: "x", Mounts: []Mount{{Kind: MountTmpfs, ImagePath: "/h", GuestPath: "/a"}}}, "Config.Mounts[0].ImagePath: a tmpfs mount takes no source"},
		{Config{OCIImage: "x", Ports: []Port{{GuestPort: 1}}}, "Config.Ports[0]: want one of host_socket and host_addr"},
		{Config{OCIImage: "x", Ports: []Port{{HostAddr: "localhost:1", GuestPort: 1}}}, "Config.Ports[0].HostAddr:"},
		{Config{OCIImage: "x", Ports: []Port{{HostSocket: "/s", GuestPort: 70000}}}, "Config.Ports[0].GuestPort:"},
		{Config{OCIImage: "x", Envv: []string{"NOEQUALS"}}, "Config.Envv[0]: \"NOEQUALS\" is not KEY=VALUE"},
		{Config{OCIImage: "x", Workdir: "w"}, "Config.Workdir:"},
		{Config{OCIImage: "x", Resources: Resources{MemoryBytes: -1}}, "Config.Resources.MemoryBytes:"},
		{Config{OCIImage: "x", Resources: Resources{CPUMillis: -1}}, "Config.Resources.CPUMillis:"},
		{Config{OCIImage: "x", Platform: "xen"}, "Config.Platform:"},
	} {
		_, err := c.cfg.Spec()
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "gvx: ") {
			t.Errorf("%+v: %v; want an error saying %q", c.cfg, err, c.says)
		}
	}
}

func TestNewFromSpec(t *testing.T) {
	ctx := context.Background()
	exe, _ := os.Executable()
	s := spec.New("oci:/img")
	s.Pull, s.Isolation = spec.PullNever, spec.IsolationNamespaces
	s.Mounts = []spec.Mount{{Type: spec.MountVolume, Source: "/v.ext4", Target: "/d", Size: 1 << 30}}
	sb, err := NewFromSpec(ctx, s, Config{Rungv: exe, Stdout: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	s.Mounts[0].Size = 1 // the sandbox keeps its own copy
	if got := sb.Spec(); got.Mounts[0].Size != 1<<30 || got.Pull != spec.PullNever {
		t.Errorf("Spec() = %+v", got)
	}
	if a := sb.Args(); !reflect.DeepEqual(a[1:], []string{"run", "--error-fd=3", "--spec-fd=4", "--stop-timeout=0"}) {
		t.Errorf("Args() = %q", a)
	}
	if _, err := NewFromSpec(ctx, s, Config{Rungv: exe, OCIImage: "other"}); err == nil || !strings.Contains(err.Error(), "may set only Rungv") {
		t.Errorf("Config episode fields beside a spec: %v", err)
	}
	if _, err := NewFromSpec(ctx, &spec.Spec{Version: spec.Version}, Config{Rungv: exe}); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("invalid spec: %v", err)
	}
}
