// Package mounttest keeps the kernel mounts a test binary makes (loop
// mounts of ext4, XFS, EROFS images) from being held by sandboxes other
// test binaries start meanwhile.
//
// An episode's init copies the host's mount tree into a mount namespace
// of its own (runtime/init_linux.go) and keeps it until the episode ends.
// Its mounts are slaves, so an unmount on the host reaches the copy, but
// only for a mount that is shared: where the host's mounts are private (a
// VM like CI's, a container) the copy of a test's loop mount stays, its
// filesystem is never unmounted, its superblock never written back, and a
// test that waits for the kernel to let go of the image (then e2fsck's it)
// fails while some other package's dockerd episode runs. Main puts the
// test binary's TMPDIR (so every t.TempDir) below a shared bind mount of
// its own, so the test's mounts are shared and their unmounts propagate.
package mounttest

import (
	"os"
	"testing"
)

// Main runs the tests of m with TMPDIR below a shared mount where it can
// make one (Linux, as root; elsewhere it just runs them) and exits with
// their status. Use it as a package's TestMain.
func Main(m *testing.M) {
	dir, undo := sharedTempDir()
	if dir != "" {
		os.Setenv("TMPDIR", dir)
	}
	code := m.Run()
	undo()
	os.Exit(code)
}
