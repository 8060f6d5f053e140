package gvx

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnsharedBytesWithoutFiemap: on tmpfs (no FIEMAP, as a fresh
// machine's /tmp) a pool episode's volume still reports what it holds;
// it said -1 (unknown) and TestPoolCLI failed in bench/freshroot.sh.
func TestUnsharedBytesWithoutFiemap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	p := filepath.Join(dir, "v.ext4")
	if err := os.WriteFile(p, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := unsharedBytes(p); got < 64<<10 {
		t.Errorf("unsharedBytes on tmpfs = %d, want at least %d", got, 64<<10)
	}
}
