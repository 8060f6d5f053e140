package image

import (
	"os"
	"path/filepath"
	"runtime"
)

// DefaultCacheDir returns where the image cache lives when no directory is
// given: $GVX_CACHE_DIR or $GVX_CACHE if set (in that order, as rungv's
// --cache-dir reads them); /var/cache/gvx for root on Unix; else the
// user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on
// Linux, ~/Library/Caches on macOS, %LocalAppData% on Windows) plus "gvx".
func DefaultCacheDir() (string, error) {
	return defaultCacheDir(os.Getenv, runtime.GOOS != "windows" && os.Geteuid() == 0)
}

func defaultCacheDir(getenv func(string) string, root bool) (string, error) {
	for _, env := range []string{"GVX_CACHE_DIR", "GVX_CACHE"} {
		if d := getenv(env); d != "" {
			return d, nil
		}
	}
	if root {
		return "/var/cache/gvx", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "gvx"), nil
}
