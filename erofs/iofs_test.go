package erofs

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"z.gfire.dev/gvx/sink"
)

// TestFS runs the standard library's fs.FS checker over an image of the
// hostile tree, and checks symlinks are not followed.
func TestFS(t *testing.T) {
	b := NewBuilder(Options{})
	defer b.Close()
	populate(t, b, treeSpec{BigDir: 300, Deep: 5})
	_, img := build(t, b)
	fsys := img.FS()
	if err := fstest.TestFS(fsys, "sizes/f0004097", "links/b", "deep/level00/level01", "special/link", "big/entry-000299"); err != nil {
		t.Fatal(err)
	}
	fi, err := fs.Stat(fsys, "special/link")
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("stat of a symlink: %v %v", fi, err)
	}
	if target, err := fs.ReadLink(fsys, "special/link"); err != nil || target != "../sizes/f0000001" {
		t.Errorf("ReadLink: %q %v", target, err)
	}
	if h, ok := fi.Sys().(*sink.Header); !ok || h.Linkname == "" {
		t.Errorf("Sys() = %#v", fi.Sys())
	}
	if _, err := fsys.Open("/abs"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("invalid path: %v", err)
	}
	b2, err := fs.ReadFile(fsys, "links/a")
	if err != nil || string(b2) != "hard" {
		t.Errorf("ReadFile: %q %v", b2, err)
	}
}
