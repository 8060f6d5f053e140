package ext4lite

import (
	"errors"
	"os"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestInodeSizePast63Bits: an inode whose i_size_high makes the size 2^63
// or more (garbage: no API can hold it) is corrupt when read, not a file of
// negative size. Lstat returned Size < 0, and overlay's tar export of the
// volume failed with "negative size on header-only type" (found by
// fuzz.FuzzExt4, kept as testdata/fuzz/FuzzExt4/size-high-negative-export-size).
func TestInodeSizePast63Bits(t *testing.T) {
	v, p := newVolume(t, 8<<20)
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	ino, err := v.Lookup(RootIno, "f")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	im := ckLoad(t, p)
	in := im.inode(uint32(ino))
	in.SizeHigh = 0xfb0000fb
	im.putInode(uint32(ino), in)
	if err := os.WriteFile(p, im.b, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h, err := w.Lstat("f")
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lstat of a file with i_size_high %#x: %+v, %v; want ErrCorrupt", in.SizeHigh, h, err)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "i_size") {
		t.Errorf("the error does not name i_size: %v", err)
	}
}
