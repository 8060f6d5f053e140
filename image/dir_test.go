package image

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("GVX_CACHE", "/srv/gvx-cache")
	if d, err := DefaultCacheDir(); err != nil || d != "/srv/gvx-cache" {
		t.Errorf("with GVX_CACHE: %q %v", d, err)
	}
	t.Setenv("GVX_CACHE", "")
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	d, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case runtime.GOOS != "windows" && os.Geteuid() == 0:
		if d != "/var/cache/gvx" {
			t.Errorf("root: %q, want /var/cache/gvx", d)
		}
	case runtime.GOOS == "linux":
		if d != filepath.Join(xdg, "gvx") {
			t.Errorf("user: %q, want $XDG_CACHE_HOME/gvx", d)
		}
	}
}
