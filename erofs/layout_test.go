package erofs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TestExtendedWhenNeeded checks the compact/extended choice: anything a
// compact inode would truncate (size ≥ 4 GiB, nlink > 65535, ids > 65535,
// an mtime off the epoch) gets an extended one, and nothing else does.
func TestExtendedWhenNeeded(t *testing.T) {
	epoch := time.Unix(1000, 0)
	b := NewBuilder(Options{Epoch: epoch})
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Mkdir(&sink.Header{Path: ".", Mode: sink.TypeDir | 0o755, Mtime: epoch}))
	for _, p := range []string{"plain", "huge", "links", "uid", "late"} {
		must(b.WriteFile(&sink.Header{Path: p, Mode: 0o644, Size: 1, Mtime: epoch}, strings.NewReader("x")))
	}
	must(b.WriteFile(&sink.Header{Path: "uid", Mode: 0o644, Size: 1, Mtime: epoch, UID: 65536}, strings.NewReader("x")))
	must(b.WriteFile(&sink.Header{Path: "late", Mode: 0o644, Size: 1, Mtime: epoch.Add(1)}, strings.NewReader("x")))
	must(b.Mkdir(&sink.Header{Path: "l", Mode: sink.TypeDir | 0o755, Mtime: epoch}))
	for i := range 70000 {
		must(b.Link("links", fmt.Sprintf("l/%05d", i)))
	}
	huge, err := b.lookup("t", "huge")
	must(err)
	huge.size = 5 << 30 // layout only: never written
	p, err := b.plan()
	must(err)
	for _, n := range p.inodes {
		want := n == huge || n.uid == 65536 || n.nlink > 65535 || !n.mtime.Equal(epoch)
		if n.l.extended != want {
			t.Errorf("inode %d (size %d, nlink %d, uid %d): extended=%v, want %v", n.id, n.l.size, n.l.nlink, n.uid, n.l.extended, want)
		}
	}
	// And the nlink and the late mtime survive the disk.
	huge.size = 1
	_, img := build(t, b)
	h, err := img.Lstat("l/69999")
	must(err)
	if h.Nlink != 70001 {
		t.Errorf("nlink %d, want 70001", h.Nlink)
	}
	if h, _ := img.Lstat("late"); !h.Mtime.Equal(epoch.Add(1)) {
		t.Errorf("late mtime %v", h.Mtime)
	}
}
