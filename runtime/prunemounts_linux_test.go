package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
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
