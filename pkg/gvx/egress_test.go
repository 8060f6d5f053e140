package gvx_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"z.gfire.dev/gvx/pkg/gvx"
)

// TestConfigEgress: Egress, AllowHostPorts and NATMaxRelays become rungv
// run's flags (rules in their canonical form); bad values, and any of
// them without NetModeNAT, fail New with the field's name.
func TestConfigEgress(t *testing.T) {
	ctx := context.Background()
	base := gvx.Config{Rungv: os.Args[0], OCIImage: "oci:/nowhere", NetworkMode: gvx.NetModeNAT}
	cfg := base
	cfg.Egress = []string{"allow=169.254.169.254/32", "deny=2001:db8::/32:443"}
	cfg.AllowHostPorts = []int{5000, 8080}
	cfg.NATMaxRelays = 64
	sb, err := gvx.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	args := sb.Args()[1:]
	want := []string{"--network=nat", "--egress=allow=169.254.169.254", "--egress=deny=[2001:db8::]/32:443",
		"--allow-host-port=5000", "--allow-host-port=8080", "--nat-max-relays=64"}
	if !reflect.DeepEqual(args[:len(want)], want) {
		t.Errorf("args %q, want them to start with %q", args, want)
	}
	sb.Close()

	// The default: no flag, so rungv's default policy (the outside world only).
	sb, err = gvx.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range sb.Args() {
		if strings.HasPrefix(a, "--egress") || strings.HasPrefix(a, "--allow-host-port") || strings.HasPrefix(a, "--nat-max-relays") {
			t.Errorf("the default config passes %q", a)
		}
	}
	sb.Close()

	for _, c := range []struct {
		mod  func(*gvx.Config)
		says string
	}{
		{func(c *gvx.Config) { c.Egress = []string{"allow=example.com"} }, "Egress[0]"},
		{func(c *gvx.Config) { c.Egress = []string{"allow=10.0.0.0/8", "permit=1.2.3.4"} }, "Egress[1]"},
		{func(c *gvx.Config) { c.AllowHostPorts = []int{0} }, "AllowHostPorts[0]"},
		{func(c *gvx.Config) { c.AllowHostPorts = []int{80, 70000} }, "AllowHostPorts[1]"},
		{func(c *gvx.Config) { c.NATMaxRelays = -1 }, "NATMaxRelays"},
		{func(c *gvx.Config) { c.NetworkMode = gvx.NetModeNone; c.AllowHostPorts = []int{5000} }, "need NetworkMode NetModeNAT"},
		{func(c *gvx.Config) { c.NetworkMode = gvx.NetModeNone; c.Egress = []string{"allow=10.0.0.0/8"} }, "need NetworkMode NetModeNAT"},
	} {
		cfg := base
		c.mod(&cfg)
		if _, err := gvx.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: New = %v, want an error naming %q", cfg, err, c.says)
		}
	}
}
