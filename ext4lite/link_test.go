package ext4lite

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestLinkSemantics: Link (the sink face) and LinkAt (link(2), the volume
// server's) are one operation and differ in one documented point only: at
// an existing name Link replaces a non-directory, LinkAt fails with
// ErrExist. Both refuse directories with ErrPermission, and a directory in
// the way is EISDIR for Link.
func TestLinkSemantics(t *testing.T) {
	v, _ := newVolume(t, 16<<20)
	for _, p := range []string{"a", "b", "c"} {
		if err := v.WriteFile(&sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	ino := func(p string) Ino {
		h, err := v.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return Ino(h.Ino)
	}
	if err := v.LinkAt(ino("a"), RootIno, "b"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("LinkAt over an existing name: %v, want ErrExist", err)
	}
	if err := v.Link("a", "b"); err != nil {
		t.Errorf("Link over an existing file: %v, want it replaced", err)
	}
	if ino("b") != ino("a") {
		t.Errorf("after Link a b, b is not a")
	}
	if h, _ := v.Lstat("a"); h.Nlink != 2 {
		t.Errorf("a has %d links, want 2", h.Nlink)
	}
	if err := v.LinkAt(ino("a"), ino("d"), "x"); err != nil {
		t.Errorf("LinkAt to a new name: %v", err)
	}
	if err := v.Link("c", "d/y"); err != nil {
		t.Errorf("Link to a new name: %v", err)
	}
	if err := v.Link("d", "e"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Link of a directory: %v, want ErrPermission", err)
	}
	if err := v.LinkAt(ino("d"), RootIno, "e"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("LinkAt of a directory: %v, want ErrPermission", err)
	}
	if err := v.Link("c", "d"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("Link over a directory: %v, want EISDIR", err)
	}
	if h, _ := v.Lstat("a"); h.Nlink != 3 {
		t.Errorf("a has %d links, want 3", h.Nlink)
	}
}
