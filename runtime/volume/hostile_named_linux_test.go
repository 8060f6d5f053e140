package volume

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/context"

	"z.gfire.dev/gvx/ext4lite"
)

// Named tests for what a hostile Sentry found in the volume server (by
// FuzzServe or by reading): each plays the requests over a real lisafs
// connection and checks the volume with ext4lite's checker and e2fsck -fn.

// checkVolume runs ext4lite's own checker on the volume file; trace says
// what was sent.
func checkVolume(t testing.TB, path, trace string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ext4lite.Check(f, nil)
	if err != nil {
		t.Fatalf("check %s: %v; sent:\n%s", path, err, trace)
	}
	if !r.Clean() {
		t.Fatalf("check %s: %v; sent:\n%s", path, r.Err(), trace)
	}
}

// TestHostileSymlinkTargetNUL: a symlink whose target holds a NUL (no
// path from a guest's syscall does, a Sentry's request can) is refused
// with EINVAL. Before: ext4lite wrote it, and the volume was corrupt (the
// kernel, e2fsck and ext4lite's checker read a fast symlink's target up to
// its first NUL, which then disagrees with i_size).
func TestHostileSymlinkTargetNUL(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	for i, target := range []string{"x\x00y", "\x00", "abc\x00"} {
		if _, err := s.root.SymlinkAt(ctx, fmt.Sprintf("l%d", i), target, 0, 0); err != unix.EINVAL {
			t.Errorf("symlink -> %q: %v, want EINVAL", target, err)
		}
	}
	s.close()
	checkVolume(t, s.path, "symlink l -> x\\0y")
	e2fsckClean(t, s.path)
}
