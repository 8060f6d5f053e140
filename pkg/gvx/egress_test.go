package gvx_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestConfigEgress: Egress, AllowHostPorts and NATMaxRelays land in the
// spec rungv gets; bad values, and any of them without NetModeNAT, fail New
// with the Config field's name.
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
	s := sb.Spec()
	if s.Network != spec.NetworkNAT || !reflect.DeepEqual(s.Egress, cfg.Egress) || !reflect.DeepEqual(s.AllowHostPorts, cfg.AllowHostPorts) || s.NATMaxRelays != 64 {
		t.Errorf("spec %+v", s)
	}
	sb.Close()

	// The default: no rule, so rungv's default policy (the outside world only).
	sb, err = gvx.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if s := sb.Spec(); s.Egress != nil || s.AllowHostPorts != nil || s.NATMaxRelays != 0 {
		t.Errorf("the default config asks for %+v", s)
	}
	sb.Close()

	for _, c := range []struct {
		mod  func(*gvx.Config)
		says string
	}{
		{func(c *gvx.Config) { c.Egress = []string{"allow=example.com"} }, "Config.Egress[0]"},
		{func(c *gvx.Config) { c.Egress = []string{"allow=10.0.0.0/8", "permit=1.2.3.4"} }, "Config.Egress[1]"},
		{func(c *gvx.Config) { c.AllowHostPorts = []int{0} }, "Config.AllowHostPorts[0]"},
		{func(c *gvx.Config) { c.AllowHostPorts = []int{80, 70000} }, "Config.AllowHostPorts[1]"},
		{func(c *gvx.Config) { c.NATMaxRelays = -1 }, "Config.NATMaxRelays"},
		{func(c *gvx.Config) { c.NetworkMode = gvx.NetModeNone; c.AllowHostPorts = []int{5000} }, "Config.AllowHostPorts: needs network nat"},
		{func(c *gvx.Config) { c.NetworkMode = gvx.NetModeNone; c.Egress = []string{"allow=10.0.0.0/8"} }, "Config.Egress: needs network nat"},
	} {
		cfg := base
		c.mod(&cfg)
		if _, err := gvx.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), c.says) || !errors.Is(err, spec.ErrInvalid) {
			t.Errorf("%+v: New = %v, want an error naming %q", cfg, err, c.says)
		}
	}
}
