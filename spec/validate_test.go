package spec

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/runtime/egress"
)

func TestValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		edit  func(*Spec)
		field string // FieldError.Field of the (first) problem
		says  string
	}{
		{func(s *Spec) { s.Version = 0 }, "version", "0 is not supported"},
		{func(s *Spec) { s.Image = "" }, "image", "is empty"},
		{func(s *Spec) { s.Pull = "sometimes" }, "pull", "want missing, always or never"},
		{func(s *Spec) { s.Args = []string{"a", "b\x00"} }, "args[1]", "NUL"},
		{func(s *Spec) { s.Entrypoint = []string{"\x00"} }, "entrypoint[0]", "NUL"},
		{func(s *Spec) { s.Env = []string{"A=1", "B"} }, "env[1]", "not KEY=VALUE"},
		{func(s *Spec) { s.Env = []string{"=x"} }, "env[0]", "not KEY=VALUE"},
		{func(s *Spec) { s.Workdir = "work" }, "workdir", "not an absolute"},
		{func(s *Spec) { s.Mounts[0].Type = "" }, "mounts[0].type", "is empty"},
		{func(s *Spec) { s.Mounts[0].Type = "nfs" }, "mounts[0].type", "want volume, bind or tmpfs"},
		{func(s *Spec) { s.Mounts[0].Source = "" }, "mounts[0].source", "volume file"},
		{func(s *Spec) { s.Mounts[1].Source = "in" }, "mounts[1].source", "not an absolute host path"},
		{func(s *Spec) { s.Mounts[2].Source = "/x" }, "mounts[2].source", "takes no source"},
		{func(s *Spec) { s.Mounts[2].Target = "tmp" }, "mounts[2].target", "not an absolute guest path"},
		{func(s *Spec) { s.Mounts[2].Target = "/./" }, "mounts[2].target", "guest's /"},
		{func(s *Spec) { s.Mounts[2].Target = "/in/" }, "mounts[2].target", "mounted already by mounts[1]"},
		{func(s *Spec) { s.Mounts[1].Size = 1 }, "mounts[1]", "are for volumes"},
		{func(s *Spec) { s.Mounts[2].MaxOpen = 1 }, "mounts[2]", "are for volumes"},
		{func(s *Spec) { s.Mounts[0].Size = MaxVolumeSize + 1 }, "mounts[0].size", "1 PiB"},
		{func(s *Spec) { s.Mounts[0].MaxOpen = -1 }, "mounts[0].max_open", "positive"},
		{func(s *Spec) { s.Mounts[0].Durability = "none" }, "mounts[0].durability", "want full (the default) or episode"},
		{func(s *Spec) { s.Mounts[0].Durability, s.Mounts[0].ReadOnly = DurabilityEpisode, true }, "mounts[0].durability", "read-only"},
		{func(s *Spec) { s.Mounts[2].Durability = DurabilityEpisode }, "mounts[2].durability", "is for volumes"},
		{func(s *Spec) { s.Ports[0].HostAddr = "127.0.0.1:1" }, "ports[0]", "one of host_socket and host_addr"},
		{func(s *Spec) { s.Ports[0] = Port{GuestPort: 1} }, "ports[0]", "one of host_socket and host_addr"},
		{func(s *Spec) { s.Ports[0].HostSocket = "ep.sock" }, "ports[0].host_socket", "not an absolute"},
		{func(s *Spec) { s.Ports[1].HostAddr = "localhost:80" }, "ports[1].host_addr", "IP literal"},
		{func(s *Spec) { s.Ports[1].HostAddr = "127.0.0.1:65536" }, "ports[1].host_addr", "IP:PORT"},
		{func(s *Spec) { s.Ports[1].GuestPort = 0 }, "ports[1].guest_port", "1 to 65535"},
		{func(s *Spec) { s.Network = "bridge" }, "network", "want none or nat"},
		{func(s *Spec) { s.Network = NetworkNone }, "egress", "needs network nat"},
		{func(s *Spec) { s.Network, s.Egress = "", nil }, "allow_host_ports", "needs network nat"},
		{func(s *Spec) { s.Network, s.Egress, s.AllowHostPorts = "", nil, nil }, "nat_max_relays", "needs network nat"},
		{func(s *Spec) { s.Egress = []string{"allow=10.0.0.0/8", "allow=example.com"} }, "egress[1]", "allow=CIDR"},
		{func(s *Spec) { s.AllowHostPorts = []int{0} }, "allow_host_ports[0]", "not in 1..65535"},
		{func(s *Spec) { s.NATMaxRelays = -1 }, "nat_max_relays", "positive"},
		{func(s *Spec) { s.Limits.MemoryBytes = -1 }, "limits.memory_bytes", "positive"},
		{func(s *Spec) { s.Limits.CPUs = math.NaN() }, "limits.cpus", "positive"},
		{func(s *Spec) { s.Limits.CPUs = math.Inf(1) }, "limits.cpus", "positive"},
		{func(s *Spec) { s.Limits.Pids = -2 }, "limits.pids", "-1 (none)"},
		{func(s *Spec) { s.Limits.Policy = "loose" }, "limits.policy", "want strict or best-effort"},
		{func(s *Spec) { s.Platform = "xen" }, "platform", "want systrap, ptrace or kvm"},
		{func(s *Spec) { s.Isolation = "vm" }, "isolation", "want auto, namespaces or seccomp-only"},
		{func(s *Spec) { s.Lockdown = "some" }, "lockdown", "want full or off"},
	} {
		s := full()
		c.edit(s)
		err := s.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.says) || !errors.Is(err, ErrInvalid) {
			t.Errorf("want %s: %q; got %v", c.field, c.says, err)
		}
	}
	if err := full().Validate(); err != nil {
		t.Fatalf("full(): %v", err)
	}
	// An egress error keeps the egress package's sentinel.
	s := full()
	s.Egress = []string{"permit=1.2.3.4"}
	if err := s.Validate(); !errors.Is(err, egress.ErrBadRule) {
		t.Errorf("bad rule: %v does not wrap egress.ErrBadRule", err)
	}
}

// TestValidateReportsAll: every problem is reported, not just the first.
func TestValidateReportsAll(t *testing.T) {
	s := &Spec{Version: Version, Workdir: "rel", Limits: Limits{CPUs: -1}}
	err := s.Validate()
	for _, f := range []string{"image", "workdir", "limits.cpus"} {
		if !strings.Contains(err.Error(), f+":") {
			t.Errorf("%v does not name %s", err, f)
		}
	}
}

func TestClone(t *testing.T) {
	s := full()
	c := s.Clone()
	c.Mounts[0].Target = "/elsewhere"
	c.Env[0] = "X=y"
	c.Entrypoint[0] = "bash"
	c.Mounts = append(c.Mounts, Mount{Type: MountTmpfs, Target: "/more"})
	if s.Mounts[0].Target != "/var/lib/docker" || s.Env[0] != "DOCKER_TLS_CERTDIR=" || s.Entrypoint[0] != "sh" || len(s.Mounts) != 3 {
		t.Errorf("Clone shares memory with the original: %+v", s)
	}
	if e := (&Spec{Entrypoint: []string{}}).Clone().Entrypoint; e == nil {
		t.Error("Clone turned a cleared entrypoint into the image's")
	}
	if e := (&Spec{}).Clone().Entrypoint; e != nil {
		t.Error("Clone turned the image's entrypoint into a cleared one")
	}
}

func TestRename(t *testing.T) {
	s := &Spec{Version: Version, Workdir: "rel", Limits: Limits{CPUs: -1}}
	err := Rename(s.Validate(), func(f string) string { return "--" + f })
	for _, f := range []string{"--image:", "--workdir:", "--limits.cpus:"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("renamed %v is no longer ErrInvalid", err)
	}
	plain := errors.New("x")
	if Rename(plain, strings.ToUpper) != plain || Rename(nil, strings.ToUpper) != nil {
		t.Error("Rename changed an error without fields")
	}
}

func TestAbsPaths(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	s := New("oci:/img")
	s.Mounts = []Mount{{Type: MountVolume, Source: "v,1=x.ext4", Target: "/d"}, {Type: MountBind, Source: "/abs", Target: "/b"}, {Type: MountTmpfs, Target: "/t"}}
	s.Ports = []Port{{HostSocket: "d.sock", GuestPort: 1}, {HostAddr: "127.0.0.1:1", GuestPort: 2}}
	if err := s.AbsPaths(); err != nil {
		t.Fatal(err)
	}
	if s.Mounts[0].Source != filepath.Join(wd, "v,1=x.ext4") || s.Mounts[1].Source != "/abs" || s.Mounts[2].Source != "" ||
		s.Ports[0].HostSocket != filepath.Join(wd, "d.sock") || s.Ports[1].HostSocket != "" {
		t.Errorf("AbsPaths: %+v %+v", s.Mounts, s.Ports)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
}
