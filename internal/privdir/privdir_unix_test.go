//go:build unix

package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: a directory is trusted only as what it is, not as what its
// path resolves to: a symlink, a file, a directory others may write, or
// (as root) one another user owns is refused, with an error naming the
// path, its owner and its mode.
func TestCheck(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	own, readable := mk("own", 0o700), mk("readable", 0o755)
	for _, d := range []string{own, readable} {
		if err := Check(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		mk("world", 0o777):   "mode 0777: it must be yours",
		mk("group", 0o770):   "not writable by others",
		mk("sticky", 0o1777): "mode 0777",
		link:                 "is a symlink, not a directory",
		file:                 "is not a directory",
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		bad[other] = "owned by uid 65534, mode 0700"
	}
	for d, want := range bad {
		err := Check(d)
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), d+" ") {
			t.Errorf("%s: %v, want a *privdir.Error with %q", d, err, want)
		}
		if err := Ensure(d); err == nil {
			t.Errorf("Ensure(%s) accepted it", d)
		}
	}
	if err := Check(filepath.Join(base, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	// Exact: only 0700 will do.
	exact := Want{Perm: 0o700}
	if err := exact.Check(own); err != nil {
		t.Errorf("exact 0700: %v", err)
	}
	if err := exact.Check(readable); err == nil || !strings.Contains(err.Error(), "mode 0700 exactly") {
		t.Errorf("exact on 0755: %v", err)
	}
}

// TestEnsure makes a missing directory private, parents included.
func TestEnsure(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "b")
	if err := Ensure(d); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d, filepath.Dir(d)} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v", p, st.Mode(), err)
		}
	}
	if err := Ensure(d); err != nil {
		t.Errorf("again: %v", err)
	}
}
