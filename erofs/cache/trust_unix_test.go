//go:build unix

package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/internal/privdir"
)

// TestOpenRefusesOthersDir: what is in a cache becomes a sandbox's root
// file system, so a cache directory someone else could have filled is
// refused: one another local user (nobody) made first, world-writable, or
// owns; one of the caller's that is writable by all; a symlink to one; a
// world-writable objects directory inside. A readable one of the caller's
// (or root's: shared read-only) is fine, and so is a symlink to one (an
// administrator may point the cache elsewhere: what it leads to is judged).
func TestOpenRefusesOthersDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, uid int) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if uid != os.Geteuid() {
			if err := os.Chown(d, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, err := Open(mk("readable", 0o755, os.Geteuid())); err != nil {
		t.Errorf("a readable cache of the caller's: %v", err)
	}
	bad := map[string]string{
		mk("world", 0o777, os.Geteuid()): "mode 0777",
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(mk("target", 0o755, os.Geteuid()), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); err != nil {
		t.Errorf("a symlink to a readable cache of the caller's: %v", err)
	}
	badLink := filepath.Join(base, "badlink")
	if err := os.Symlink(mk("badtarget", 0o777, os.Geteuid()), badLink); err != nil {
		t.Fatal(err)
	}
	bad[badLink] = "mode 0777"
	inner := mk("inner", 0o755, os.Geteuid())
	if err := os.Mkdir(filepath.Join(inner, objectsDir), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(inner, objectsDir), 0o777)
	bad[inner] = filepath.Join(inner, objectsDir) + " is owned by uid"
	if os.Geteuid() == 0 {
		bad[mk("nobody-world", 0o777, 65534)] = "owned by uid 65534, mode 0777"
		bad[mk("nobody", 0o755, 65534)] = "owned by uid 65534, mode 0755"
	}
	for d, want := range bad {
		_, err := Open(d)
		var pe *privdir.Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("Open(%s): %v, want a *privdir.Error with %q", d, err, want)
		}
	}
}
