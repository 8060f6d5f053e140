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
	t.Setenv("GVX_CACHE_DIR", "/srv/rungv-cache")
	if d, err := DefaultCacheDir(); err != nil || d != "/srv/rungv-cache" {
		t.Errorf("with GVX_CACHE_DIR and GVX_CACHE: %q %v (want GVX_CACHE_DIR's, as rungv --cache-dir)", d, err)
	}
	t.Setenv("GVX_CACHE_DIR", "")
	t.Setenv("GVX_CACHE", "")
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	d, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && os.Geteuid() == 0 && d != "/var/cache/gvx" {
		t.Errorf("root: %q, want /var/cache/gvx", d)
	}
	if d, _ := defaultCacheDir(os.Getenv, true); d != "/var/cache/gvx" {
		t.Errorf("root: %q, want /var/cache/gvx", d)
	}
	d, err = defaultCacheDir(os.Getenv, false)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && d != filepath.Join(xdg, "gvx") {
		t.Errorf("user: %q, want $XDG_CACHE_HOME/gvx", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if d, _ := defaultCacheDir(os.Getenv, false); runtime.GOOS == "linux" && d != "/home/someone/.cache/gvx" {
		t.Errorf("user without XDG_CACHE_HOME: %q, want ~/.cache/gvx", d)
	}
}
