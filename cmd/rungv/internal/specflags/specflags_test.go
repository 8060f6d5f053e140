package specflags_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/poolcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/runcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/specflags"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// parse runs verb's real flag definitions over args and returns the spec
// specflags.Spec builds from them (the episode is not run).
func parse(t *testing.T, verb *cli.Command, args ...string) (*spec.Spec, error) {
	t.Helper()
	var got *spec.Spec
	var gotErr error
	cmd := &cli.Command{Name: verb.Name, Flags: verb.Flags, Action: func(c *cli.Context) error {
		got, gotErr = specflags.Spec(c, "rungv "+verb.Name)
		return nil
	}}
	app := &cli.App{Name: "rungv", Commands: []*cli.Command{cmd}, DisableSliceFlagSeparator: true, Writer: io.Discard, ErrWriter: io.Discard}
	if err := app.Run(append([]string{"rungv", verb.Name}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return got, gotErr
}

// TestSameSpec: for the same options, the SDK's Config, rungv run's flags,
// rungv pool's flags and an SDK pool make the same spec.
func TestSameSpec(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	exe, _ := os.Executable()
	golden := filepath.Join(wd, "golden.ext4")
	if err := os.WriteFile(golden, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	// The clone goes elsewhere than the seed's /var/lib/docker volume.
	poolArgs := []string{"--golden", golden, "--scratch", filepath.Join(wd, "eps"), "-n", "3", "-j", "2", "--volume-path", "/golden"}
	for _, c := range []struct {
		name  string
		cfg   gvx.Config // Rungv is added
		flags []string   // before IMAGE COMMAND…
		pool  bool       // also through a pool (no ports)
	}{
		{"defaults", gvx.Config{OCIImage: "oci:/img", NetworkMode: gvx.NetModeNAT}, nil, true},
		{"none and a command", gvx.Config{OCIImage: "oci:/img", Cmd: []string{"sh", "-c", "echo hi"}},
			[]string{"--network", "none"}, true},
		{"the seed's episode", gvx.Config{
			NetworkMode: gvx.NetModeNAT, NetRaw: true, AllowPacketSocketWrite: true, AllowSUID: true,
			OCIImage: "docker:dind", Entrypoint: []string{"dockerd-entrypoint.sh"}, EntrypointSet: true,
			Cmd: []string{"--tls=false"}, Envv: []string{"DOCKER_TLS_CERTDIR="},
			Mounts:    []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: "ep,1=x.ext4", GuestPath: "/var/lib/docker"}},
			Resources: gvx.Resources{MemoryBytes: 4 << 30, CPUMillis: 2000},
		}, []string{"--net-raw", "--allow-packet-socket-write", "--allow-suid", "--entrypoint", "dockerd-entrypoint.sh",
			"-e", "DOCKER_TLS_CERTDIR=", "--mount", `type=volume,"src=ep,1=x.ext4",dst=/var/lib/docker`, "-m", "4g", "--cpus", "2"}, true},
		{"everything else", gvx.Config{
			Platform: gvx.PlatformPtrace, NetworkMode: gvx.NetModeNAT, OCIImage: "oci:/img", EntrypointSet: true,
			Cmd: []string{"true"}, Envv: []string{"A=1", "B=2"}, Workdir: "/w", User: "1:2",
			Mounts: []gvx.Mount{
				{Kind: gvx.MountBind, ImagePath: "in", GuestPath: "/in", ReadOnly: true},
				{Kind: gvx.MountTmpfs, GuestPath: "/tmp"},
			},
			Resources: gvx.Resources{MemoryBytes: 512 << 20, CPUMillis: 1500, PidsLimit: 100, BestEffort: true},
			Ports:     []gvx.Port{{HostSocket: "d.sock", GuestPort: 2375}, {HostAddr: "127.0.0.1:8080", GuestPort: 80}},
			Egress:    []string{"allow=10.0.0.0/8:443", "deny=10.1.0.0/16"}, AllowHostPorts: []int{5000, 5001}, NATMaxRelays: 9,
		}, []string{"--platform", "ptrace", "--entrypoint", "", "-e", "A=1", "-e", "B=2", "-w", "/w", "-u", "1:2",
			"--mount", "type=bind,src=in,dst=/in,readonly", "--mount", "type=tmpfs,dst=/tmp",
			"-m", "512m", "--cpus", "1.5", "--pids-limit", "100", "--limits", "best-effort",
			"-p", "unix:d.sock:2375", "-p", "8080:80",
			"--egress", "allow=10.0.0.0/8:443", "--egress", "deny=10.1.0.0/16",
			"--allow-host-port", "5000", "--allow-host-port", "5001", "--nat-max-relays", "9"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Rungv = exe
			sdk, err := c.cfg.Spec()
			if err != nil {
				t.Fatal(err)
			}
			tail := append([]string{c.cfg.OCIImage}, c.cfg.Cmd...)
			run, err := parse(t, runcmd.Command, append(append([]string{}, c.flags...), tail...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(run, sdk) {
				t.Errorf("rungv run's spec differs from the SDK's:\nrun %#v\nsdk %#v", run, sdk)
			}
			if !c.pool {
				return
			}
			pool, err := parse(t, poolcmd.Command, append(append(append([]string{}, poolArgs...), c.flags...), tail...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pool, sdk) {
				t.Errorf("rungv pool's spec differs from the SDK's:\npool %#v\nsdk  %#v", pool, sdk)
			}
			p, err := gvx.NewPool(gvx.PoolConfig{Golden: golden, ScratchDir: filepath.Join(wd, "eps"), GuestPath: "/golden", Base: c.cfg, CloneMode: reflink.Auto})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if got := p.Spec(); !reflect.DeepEqual(got, sdk) {
				t.Errorf("an SDK pool's spec differs from the SDK's:\npool %#v\nsdk  %#v", got, sdk)
			}
		})
	}
}

// TestSharedFlags: run and pool take the same episode flags, with the same
// defaults (pool has all of run's but -p).
func TestSharedFlags(t *testing.T) {
	byName := func(fs []cli.Flag) map[string]string {
		m := map[string]string{}
		for _, f := range fs {
			m[f.Names()[0]] = f.String()
		}
		return m
	}
	run, pool := byName(runcmd.Command.Flags), byName(poolcmd.Command.Flags)
	for _, f := range specflags.Flags() {
		name := f.Names()[0]
		if run[name] != f.String() {
			t.Errorf("rungv run --%s: %q, want %q", name, run[name], f.String())
		}
		if want := f.String(); name != "publish" && pool[name] != want {
			t.Errorf("rungv pool --%s: %q, want %q", name, pool[name], want)
		}
	}
	if _, ok := pool["publish"]; ok {
		t.Error("rungv pool takes -p")
	}
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--network", "host", "oci:/img"}, `--network: "host": want none or nat`},
		{[]string{"--cpus", "-1", "oci:/img"}, "--cpus: -1: want a positive number"},
		{[]string{"--pids-limit", "0", "oci:/img"}, "--pids-limit 0"},
		{[]string{"--pids-limit", "-2", "oci:/img"}, "--pids-limit: -2"},
		{[]string{"--limits", "loose", "oci:/img"}, "--limits: \"loose\""},
		{[]string{"--pull", "sometimes", "oci:/img"}, "--pull: \"sometimes\""},
		{[]string{"--isolation", "vm", "oci:/img"}, "--isolation: \"vm\""},
		{[]string{"--platform", "xen", "oci:/img"}, "--platform: \"xen\""},
		{[]string{"-w", "rel", "oci:/img"}, "--workdir: \"rel\" is not an absolute guest path"},
		{[]string{"--mount", "type=tmpfs,dst=/a", "--mount", "type=tmpfs,dst=/a/", "oci:/img"}, "--mount (mounts[1].target): /a is mounted already by mounts[0]"},
		{[]string{"--network", "none", "--egress", "allow=10.0.0.0/8", "oci:/img"}, "--egress: needs network nat"},
		{[]string{"-m", "0", "oci:/img"}, `--memory "0"`},
		{[]string{"-p", "80", "oci:/img"}, `-p "80"`},
		{nil, "IMAGE is required"},
	} {
		_, err := parse(t, runcmd.Command, c.args...)
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "rungv run: ") {
			t.Errorf("%q: %v; want a usage error saying %q", c.args, err, c.says)
		}
	}
}

// TestSpecBesideFlags: --spec is the whole episode: an episode flag,
// IMAGE or COMMAND beside it is refused, host-side flags are not.
func TestSpecBesideFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ep.json")
	if err := os.WriteFile(file, []byte(`{"version":1,"image":"oci:/img","args":["true"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := parse(t, runcmd.Command, "--spec", file, "--json", "--log-level", "debug")
	if err != nil || s.Image != "oci:/img" || s.Args[0] != "true" {
		t.Fatalf("--spec with host-side flags: %+v, %v", s, err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--spec", file, "-m", "1g"}, "--memory cannot be given with --spec " + file},
		{[]string{"--spec", file, "--network", "none", "-e", "A=1"}, "--env, --network cannot be given"},
		{[]string{"--spec", file, "--privileged=false"}, "--privileged cannot be given"},
		{[]string{"--spec", file, "oci:/other"}, "IMAGE and COMMAND cannot be given"},
		{[]string{"--spec", filepath.Join(filepath.Dir(file), "missing.json")}, "missing.json: no such file"},
	} {
		_, err := parse(t, runcmd.Command, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want an error saying %q", c.args, err, c.says)
		}
	}
	if err := os.WriteFile(file, []byte(`{"version":1,"image":"oci:/img","memory":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(t, runcmd.Command, "--spec", file); err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), `unknown field "memory"`) {
		t.Errorf("unknown field: %v; want the path and the field named", err)
	}
}
