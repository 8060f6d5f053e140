package ext4lite

import (
	"bytes"
	"reflect"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestDataRegions: the volume (and a Tree of it) reports a file's data as
// its written extents, merged where adjacent and clipped to the size; a
// hole of any size costs nothing.
func TestDataRegions(t *testing.T) {
	v, _ := newVolume(t, 32<<20)
	defer v.Close()
	if err := v.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	ino, err := v.CreateAt(mustLookup(t, v, "d"), "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	bs := int64(v.BlockSize())
	blk := bytes.Repeat([]byte("x"), int(bs))
	for _, off := range []int64{0, bs, 10 * bs, 1 << 40} {
		if _, err := v.WriteAtIno(ino, blk, off); err != nil {
			t.Fatal(err)
		}
	}
	size := int64(1<<40 + 100)
	if err := v.SetAttrIno(ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	want := []sink.Region{{Off: 0, Len: 2 * bs}, {Off: 10 * bs, Len: bs}, {Off: 1 << 40, Len: 100}}
	tree, err := v.Sub("d")
	if err != nil {
		t.Fatal(err)
	}
	for name, dm := range map[string]sink.DataMapper{"FS": v, "Tree": tree} {
		p := "d/f"
		if name == "Tree" {
			p = "f"
		}
		got, err := dm.DataRegions(p)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s.DataRegions = %v, %v; want %v", name, got, err, want)
		}
	}
}

func mustLookup(t *testing.T, v *FS, name string) Ino {
	t.Helper()
	ino, err := v.Lookup(RootIno, name)
	if err != nil {
		t.Fatal(err)
	}
	return ino
}
