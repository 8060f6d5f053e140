//go:build unix

package durable

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("SyncDir of a missing directory: %v, want an error naming it", err)
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestWriteFileErrorLeavesNothing: a failing write leaves no temporary
// file and the old target as it was, and its error comes back as it is.
func TestWriteFileErrorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFile(path, 0o644, Options{}, func(f *os.File) error {
		f.WriteString("half a new fi")
		return boom
	})
	if err != boom {
		t.Fatalf("WriteFile: %v, want the write's error", err)
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "f" {
		t.Errorf("after a failed write the directory holds %q, want only f", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("target holds %q after a failed write, want the old contents", b)
	}
}

// TestWriteFileOnlyComplete: while write runs the target still holds the
// old contents (readers never see a partial file); afterwards the whole
// new one, with perm exactly, whatever the umask.
func TestWriteFileOnlyComplete(t *testing.T) {
	if runtime.GOOS != "windows" {
		old := syscall.Umask(0o077)
		defer syscall.Umask(old)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, 0o755, Options{}, func(f *os.File) error {
		f.WriteString("new ")
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Errorf("target holds %q while being written, want the old contents", b)
		}
		_, err := f.WriteString("contents")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(b) != "new contents" || fi.Mode().Perm() != 0o755 {
		t.Errorf("target holds %q mode %v, want %q mode 0755", b, fi.Mode().Perm(), "new contents")
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q, want only f", got)
	}
}

// TestNoReplace: NoReplace refuses an existing target with fs.ErrExist,
// leaving it and no temporary; without NoReplace the target is replaced.
func TestNoReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(f *os.File) error { _, err := f.WriteString("new"); return err }
	err := WriteFile(path, 0o644, Options{NoReplace: true}, write)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("NoReplace over an existing file: %v, want fs.ErrExist naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("NoReplace changed the target to %q", b)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q after a refused publish, want only f", got)
	}
	if err := WriteFile(filepath.Join(dir, "g"), 0o644, Options{NoReplace: true}, write); err != nil {
		t.Errorf("NoReplace to a new name: %v", err)
	}
	if err := WriteFile(path, 0o644, Options{}, write); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("replace left %q", b)
	}
}

// TestRenameNoReplace: the exclusive rename (or, where it is missing,
// the link fallback) refuses an existing target.
func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("a"), 0o644)
	os.WriteFile(b, []byte("b"), 0o644)
	if err := Rename(a, b, true); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Rename over an existing file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(b); string(got) != "b" {
		t.Errorf("refused rename changed the target to %q", got)
	}
}

// TestPublishDirectory: a directory is published whole by a rename; a
// refused one is left to its caller when not empty.
func TestPublishDirectory(t *testing.T) {
	dir := t.TempDir()
	tmp, final := filepath.Join(dir, ".d.tmp"), filepath.Join(dir, "d")
	os.Mkdir(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "x"), []byte("x"), 0o644)
	if err := Publish(tmp, final, Options{NoReplace: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(final, "x")); string(b) != "x" {
		t.Errorf("published directory holds %q", b)
	}
	os.Mkdir(tmp, 0o755)
	if err := Publish(tmp, final, Options{NoReplace: true}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("NoReplace over a directory: %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(tmp); err == nil {
		t.Errorf("empty temporary directory %s left after an error", tmp)
	}
}

// TestTempPublishLate: a Temp is published under a name known only after
// writing; Discard after Publish leaves the target.
func TestTempPublishLate(t *testing.T) {
	dir := t.TempDir()
	tf, err := CreateTemp(filepath.Join(dir, "blob"))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Discard()
	tf.WriteString("data")
	final := filepath.Join(dir, "sha-of-data")
	if err := tf.Publish(final, 0o444, Options{}); err != nil {
		t.Fatal(err)
	}
	tf.Discard()
	if b, _ := os.ReadFile(final); string(b) != "data" {
		t.Errorf("published %q", b)
	}
	if err := tf.Publish(final, 0o444, Options{}); err == nil {
		t.Error("a second Publish of one Temp succeeded")
	}
}

// TestFsyncOrder runs a WriteFile under strace: the temporary file is
// fsynced before the rename and the directory after it, so a crash can
// neither publish a torn file nor lose the rename.
func TestFsyncOrder(t *testing.T) {
	if os.Getenv("DURABLE_STRACE_CHILD") != "" {
		path := os.Getenv("DURABLE_STRACE_CHILD")
		if err := WriteFile(path, 0o644, Options{NoReplace: true}, func(f *os.File) error {
			_, err := f.WriteString("x")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: cannot watch the fsyncs")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-y", "-o", out, "-e", "trace=fsync,rename,renameat,renameat2",
		os.Args[0], "-test.run=^TestFsyncOrder$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DURABLE_STRACE_CHILD="+filepath.Join(dir, "f"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (%v): %s", err, b)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range strings.Split(string(trace), "\n") {
		switch {
		case strings.Contains(l, "fsync(") && strings.Contains(l, ".f.tmp-"):
			order = append(order, "fsync-file")
		case strings.Contains(l, "rename") && strings.Contains(l, ".f.tmp-"):
			order = append(order, "rename")
		case strings.Contains(l, "fsync(") && strings.Contains(l, "<"+dir+">"):
			order = append(order, "fsync-dir")
		}
	}
	if got := strings.Join(order, " "); got != "fsync-file rename fsync-dir" {
		t.Errorf("syscalls in order: %q, want %q; trace:\n%s", got, "fsync-file rename fsync-dir", bytes.TrimSpace(trace))
	}
}
