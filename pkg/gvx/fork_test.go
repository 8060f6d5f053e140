package gvx_test

import (
	"context"
	"strings"
	"testing"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// TestRestoreRefuses: a restore that would reuse the checkpoint's host
// sockets, or miscount its volumes, is refused before anything is cloned.
func TestRestoreRefuses(t *testing.T) {
	cp := &gvx.Checkpoint{Dir: t.TempDir(), Spec: &spec.Spec{Version: spec.Version, Image: "oci:x",
		Ports:  []spec.Port{{HostSocket: "/run/golden.sock", GuestPort: 2375}},
		Mounts: []spec.Mount{{Type: spec.MountVolume, Source: "/nonexistent/volume-0.ext4", Target: "/var/lib/docker"}}}}
	ctx := context.Background()
	for _, c := range []struct {
		vols []string
		proc gvx.Config
		want string
	}{
		{[]string{"a.ext4"}, gvx.Config{}, "publishes 1 ports: give the restored episode its own host socket"},
		{[]string{"a.ext4"}, gvx.Config{Ports: []gvx.Port{{HostSocket: "/run/ep.sock", GuestPort: 80}}}, "guest port 80, the checkpoint's is 2375"},
		{nil, gvx.Config{Ports: []gvx.Port{{HostSocket: "/run/ep.sock"}}}, "0 volume paths for 1 volumes"},
		{[]string{"a.ext4"}, gvx.Config{Ports: []gvx.Port{{HostSocket: "/run/ep.sock"}}, Cmd: []string{"x"}}, "may set only Rungv"},
	} {
		if _, err := cp.Restore(ctx, c.vols, c.proc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Restore(%v, %+v): %v, want %q", c.vols, c.proc, err, c.want)
		}
	}
}
