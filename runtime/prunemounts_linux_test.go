package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestKeepRoots: the paths init binds into its new root are the kept ones
// and their real paths (through a symlink), without one under another (a
// prefix that is not a parent directory, /srv/ab beside /srv/a, is not
// "under").
func TestKeepRoots(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	got := keepRoots([]string{"/srv/a/state", "/srv/a", "/srv/ab", "/proc", "/proc/self", link + "/x"})
	want := []string{"/proc", "/srv/a", "/srv/ab", link + "/x"}
	if !slices.Equal(got, want) {
		t.Errorf("keepRoots = %v, want %v", got, want)
	}
	got = keepRoots([]string{link})
	if !slices.Contains(got, link) || !slices.Contains(got, real) {
		t.Errorf("keepRoots(%s) = %v: want the link's path and its target %s", link, got, real)
	}
	for _, c := range []struct {
		p, dir string
		want   bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/x", "/", true}, {"/a", "/a/b", false}} {
		if pathUnder(c.p, c.dir) != c.want {
			t.Errorf("pathUnder(%q, %q) = %v", c.p, c.dir, !c.want)
		}
	}
}

// TestPlanMountKeep: the plan's keep list names every host path the
// sandbox is given (rootfs, bind sources, annotated image files) and
// runsc's log and profile directories, and nothing relative or empty.
func TestPlanMountKeep(t *testing.T) {
	p := &plan{
		state: "/st/ep", bundle: "/st/ep/bundle",
		host: Host{DebugLogDir: "logs/", ProfileDir: "/prof"},
		oci: &specs.Spec{
			Root:        &specs.Root{Path: "/st/ep/bundle/rootfs"},
			Mounts:      []specs.Mount{{Source: "/host/src", Destination: "/src", Type: "bind"}, {Source: "tmpfs", Destination: "/tmp", Type: "tmpfs"}},
			Annotations: map[string]string{"dev.gvisor.spec.rootfs.source": "/cache/img.erofs", "dev.gvisor.spec.rootfs.type": "erofs"},
		},
	}
	got := p.mountKeep()
	cwd, _ := os.Getwd()
	for _, w := range []string{"/st/ep", "/st/ep/bundle", "/st/ep/runsc", "/st/ep/bundle/rootfs", "/host/src", "/cache/img.erofs", "/prof", filepath.Join(cwd, "logs")} {
		if !slices.Contains(got, w) {
			t.Errorf("mountKeep() = %v: %s missing", got, w)
		}
	}
	for _, k := range got {
		if !filepath.IsAbs(k) || k == "tmpfs" {
			t.Errorf("mountKeep() keeps %q", k)
		}
	}
}
