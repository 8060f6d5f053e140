package erofs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// cycleImage builds a/b/up (a file) and a/f with the builder, then
// re-points up's dirent at the root, a directory: a/b/up/a/b/up/… never
// ends. EROFS has no checksum over directory blocks (the superblock's is
// recomputed, for metadata in block 0), so the image opens.
func cycleImage(t *testing.T) *Image {
	t.Helper()
	b := NewBuilder(Options{})
	defer b.Close()
	for _, h := range []*sink.Header{
		{Path: "a", Mode: sink.TypeDir | 0o755},
		{Path: "a/b", Mode: sink.TypeDir | 0o755},
	} {
		if err := b.Mkdir(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"a/b/up", "a/f"} {
		if err := b.WriteFile(&sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: 1}, bytes.NewReader([]byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	raw, img := build(t, b)
	up, err := img.Lstat("a/b/up")
	if err != nil {
		t.Fatal(err)
	}
	root, err := img.Lstat(".")
	if err != nil {
		t.Fatal(err)
	}
	// The one dirent naming up's nid (a file has no "." entry) becomes
	// a directory entry for the root.
	var key [8]byte
	le.PutUint64(key[:], up.Ino)
	hits := 0
	for off := 0; off+disk.DirentSize <= len(raw); off += 4 {
		if bytes.Equal(raw[off:off+8], key[:]) && raw[off+10] == disk.FTRegFile {
			le.PutUint64(raw[off:], root.Ino)
			raw[off+10] = disk.FTDir
			hits++
		}
	}
	if hits != 1 {
		t.Fatalf("found %d dirents naming a/b/up's nid %d, want 1", hits, up.Ino)
	}
	le.PutUint32(raw[1028:], superChecksum(raw[:4096])) // the metadata may share block 0
	im, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := im.Lstat("a/b/up/a/b/up/a/f"); err != nil || h.Type() != sink.TypeReg {
		t.Fatalf("the crafted image has no cycle: Lstat a/b/up/a/b/up/a/f = %v, %v", h, err)
	}
	return im
}

// TestWalkCycleImage walks an EROFS image whose directory a/b names the
// root again (an image is untrusted input: a crafted one can point any
// dirent at any nid). Check reports the second name; overlay.ExportTar
// and sink.Copy over the image, which followed every name until the path
// limit (export) or forever (copy), stop with a *sink.DirLinkError naming
// the path and the nid.
func TestWalkCycleImage(t *testing.T) {
	im := cycleImage(t)
	if _, err := im.Check(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Check = %v, want ErrCorrupt", err)
	}
	wantLink := func(what string, err error) {
		t.Helper()
		var de *sink.DirLinkError
		if !errors.As(err, &de) {
			t.Fatalf("%s = %v, want a *sink.DirLinkError", what, err)
		}
		root, _ := im.Lstat(".")
		if de.Path != "a/b/up" || de.First != "." || de.Ino != root.Ino {
			t.Errorf("%s: DirLinkError %+v, want a/b/up, the root (nid %d) again", what, *de, root.Ino)
		}
		t.Log(err)
	}
	done := make(chan error, 1)
	go func() { done <- overlay.ExportTar(&bytes.Buffer{}, im, overlay.ExportOptions{MaxPath: -1}) }()
	select {
	case err := <-done:
		wantLink("ExportTar", err)
	case <-time.After(60 * time.Second):
		t.Fatal("ExportTar did not end in 60 s")
	}
	go func() { done <- sink.Copy(sinktest.NewMemFS(), im) }()
	select {
	case err := <-done:
		wantLink("sink.Copy", err)
	case <-time.After(60 * time.Second):
		t.Fatal("sink.Copy did not end in 60 s")
	}
}
