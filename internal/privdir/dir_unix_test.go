//go:build unix

package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirOpenFile: a trusted directory's files are opened through its
// descriptor and judged: a symlink (to a file of the caller's, even), a
// directory, a file writable by others, another user's file and one over
// the size asked are refused with an error naming the file; a plain file
// of the caller's is read. A directory that fails the rule is not opened.
func TestDirOpenFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ck")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("data"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("good", 0o600)
	write("world", 0o666)
	outside := filepath.Join(base, "outside")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{"link": "is a symlink", "world": "mode 0666", "sub": "not a regular file", "missing": "no such file"}
	if os.Geteuid() == 0 {
		p := write("nobodys", 0o644)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		bad["nobodys"] = "owned by uid 65534"
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := d.ReadFile("good", 100); err != nil || string(b) != "data" {
		t.Errorf("ReadFile(good) = %q, %v", b, err)
	}
	if _, err := d.ReadFile("good", 3); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Errorf("ReadFile(good, 3): %v, want too large", err)
	}
	for name, want := range bad {
		f, err := d.OpenFile(name)
		if err == nil {
			f.Close()
			t.Errorf("OpenFile(%s) opened it", name)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Join(dir, name)) {
			t.Errorf("OpenFile(%s): %v, want %q and the path", name, err, want)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	var pe *Error
	if d2, err := Open(dir); !errors.As(err, &pe) {
		if d2 != nil {
			d2.Close()
		}
		t.Errorf("Open of a directory writable by all: %v, want *Error", err)
	}
	link := filepath.Join(base, "dirlink")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); !errors.As(err, &pe) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Open of a symlink to a directory: %v, want *Error naming the symlink", err)
	}
}
