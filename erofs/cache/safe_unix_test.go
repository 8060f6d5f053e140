//go:build unix

package cache

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRefusesUnsafeDir: a cache directory another local user can write
// into (made by them, or left open to everyone) is refused before anything
// is read from it, with an error naming it and the fix.
func TestOpenRefusesUnsafeDir(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		setup func(t *testing.T, dir string) string // returns the directory to name
	}{
		{"mode 0777", false, func(t *testing.T, dir string) string { chmod(t, dir, 0o777); return dir }},
		{"sticky 01777", false, func(t *testing.T, dir string) string { chmod(t, dir, 0o1777); return dir }},
		{"group-writable", false, func(t *testing.T, dir string) string { chmod(t, dir, 0o775); return dir }},
		{"objects 0777", false, func(t *testing.T, dir string) string {
			chmod(t, filepath.Join(dir, objectsDir), 0o777)
			return filepath.Join(dir, objectsDir)
		}},
		{"objects a symlink", false, func(t *testing.T, dir string) string {
			elsewhere := t.TempDir()
			o := filepath.Join(dir, objectsDir)
			if err := os.RemoveAll(o); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, o); err != nil {
				t.Fatal(err)
			}
			return o
		}},
		{"owned by nobody", true, func(t *testing.T, dir string) string {
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			dir := filepath.Join(t.TempDir(), "cache")
			if _, err := Open(dir); err != nil {
				t.Fatal(err)
			}
			bad := c.setup(t, dir)
			_, err := Open(dir)
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("Open of a cache %s: %v; want ErrUnsafe", c.name, err)
			}
			for _, s := range []string{bad, "remove it", "$GVX_CACHE_DIR"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestRootsCacheReadableByOthers: root's shared cache (0755, root's) is
// still opened and read by another user, as rungv's read-only fallback
// does.
func TestRootsCacheReadableByOthers(t *testing.T) {
	if dir := os.Getenv("GVX_CACHE_TEST_OPEN"); dir != "" {
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lookup(hexA + ".erofs"); err != nil {
			t.Fatal(err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root")
	}
	tmp := t.TempDir()
	chmod(t, filepath.Dir(tmp), 0o755)
	chmod(t, tmp, 0o755)
	dir := filepath.Join(tmp, "cache")
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pin.Ensure(hexA+".erofs", func(f *os.File) error { _, err := f.WriteString("image"); return err }); err != nil {
		t.Fatal(err)
	}
	pin.Close()
	// The test binary sits in a 0700 build directory: nobody runs a copy.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "cache.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestRootsCacheReadableByOthers$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GVX_CACHE_TEST_OPEN="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nobody opening root's cache: %v\n%s", err, out)
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestUnsafeIndex: an index.json that is a symlink or writable by others
// is refused (it names the objects episodes boot from).
func TestUnsafeIndex(t *testing.T) {
	for _, name := range []string{"symlink", "world-writable"} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			if err := c.Update(func(ix *Index) error { ix.Entries["x"] = Entry{Objects: []string{hexA + ".erofs"}}; return nil }); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(c.Dir(), indexFile)
			if name == "symlink" {
				theirs := filepath.Join(t.TempDir(), "index.json")
				if err := os.Rename(p, theirs); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(theirs, p); err != nil {
					t.Fatal(err)
				}
			} else {
				chmod(t, p, 0o666)
			}
			if _, err := c.Index(); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Index with a %s index.json: %v; want ErrUnsafe naming it", name, err)
			}
		})
	}
}

// TestObjectsReadOnly: a published object is 0444, so an edit through a
// hard link to it (someone's copy) fails for anyone but root.
func TestObjectsReadOnly(t *testing.T) {
	c := open(t)
	pin, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Close()
	p, _, err := pin.Ensure(hexA+".erofs", func(f *os.File) error { _, err := f.WriteString("image"); return err })
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("object mode %v, %v; want 0444", fi.Mode(), err)
	}
}

// TestUnsafeObject: an object swapped for a symlink, left writable to
// others, or owned by another user is not handed out by Lookup (ErrUnsafe,
// naming it) and Ensure builds it again.
func TestUnsafeObject(t *testing.T) {
	cases := []struct {
		name   string
		root   bool
		damage func(t *testing.T, p string)
	}{
		{"symlink", false, func(t *testing.T, p string) {
			other := filepath.Join(t.TempDir(), "theirs.erofs")
			if err := os.WriteFile(other, []byte("their image"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"world-writable", false, func(t *testing.T, p string) { chmod(t, p, 0o666) }},
		{"owned by nobody", true, func(t *testing.T, p string) {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			c := open(t)
			pin, err := c.Pin()
			if err != nil {
				t.Fatal(err)
			}
			defer pin.Close()
			name := hexA + ".erofs"
			build := func(f *os.File) error { _, err := f.WriteString("image"); return err }
			p, _, err := pin.Ensure(name, build)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, p)
			if got, err := c.Lookup(name); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), p) {
				t.Errorf("Lookup = %q, %v; want ErrUnsafe naming %s", got, err, p)
			}
			got, created, err := pin.Ensure(name, build)
			if err != nil || !created || got != p {
				t.Fatalf("Ensure = %q, %v, %v; want %s built again", got, created, err, p)
			}
			if b, err := os.ReadFile(got); err != nil || string(b) != "image" {
				t.Errorf("rebuilt object holds %q, %v", b, err)
			}
			if _, err := c.Lookup(name); err != nil {
				t.Errorf("Lookup after the rebuild: %v", err)
			}
		})
	}
}
