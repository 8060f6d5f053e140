package erofs

import (
	"bytes"
	"errors"
	"testing"

	"z.gfire.dev/gvx/sink"
)

func TestCheck(t *testing.T) {
	for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
		b := NewBuilder(Options{Profile: prof})
		populate(t, b, treeSpec{BigDir: 3000, Deep: 60})
		raw, img := build(t, b)
		res, err := img.Check()
		if err != nil {
			t.Fatalf("%s: %v", prof, err)
		}
		if res.Inodes != int64(img.Inodes()) || res.Directories < 60 || res.Entries < 3000 {
			t.Errorf("%s: %+v", prof, res)
		}
		b.Close()

		// A wrong link count is found.
		h, err := img.Lstat("links/a")
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(raw)
		off := int64(h.Ino) << 5 // meta_blkaddr is 0
		if bad[off]&1 == 0 {
			le.PutUint16(bad[off+6:], 5) // compact i_nlink
		} else {
			le.PutUint32(bad[off+44:], 5) // extended i_nlink
		}
		le.PutUint32(bad[1028:], superChecksum(bad[:4096]))
		im2, err := Open(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := im2.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: nlink 5 for 3 names: Check = %v", prof, err)
		}

		// So is a superblock inode count that disagrees with the tree.
		bad = bytes.Clone(raw)
		le.PutUint64(bad[1024+16:], img.Inodes()+1)
		le.PutUint32(bad[1028:], superChecksum(bad[:4096]))
		im3, _ := Open(bytes.NewReader(bad), int64(len(bad)))
		if _, err := im3.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: inode count off by one: Check = %v", prof, err)
		}
	}
}

// TestCheckSizeAndNames: an inode whose i_size is 2^63-1 (FLAT_PLAIN:
// the block count overflowed and skipped the data-range check) and a
// directory entry whose name holds '/' are corrupt, to the reader and to
// Check. Before, both were accepted (issue 14).
func TestCheckSizeAndNames(t *testing.T) {
	b := NewBuilder(Options{Profile: ProfileRuntime})
	defer b.Close()
	body := bytes.Repeat([]byte("p"), 8192) // whole blocks: FLAT_PLAIN
	if err := b.WriteFile(&sink.Header{Path: "big", Mode: sink.TypeReg | 0o644, UID: 100000, Size: int64(len(body))}, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(&sink.Header{Path: "sl-ash", Mode: sink.TypeReg | 0o644}, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	raw, img := build(t, b)
	if _, err := img.Check(); err != nil {
		t.Fatal(err)
	}
	h, err := img.Lstat("big")
	if err != nil {
		t.Fatal(err)
	}
	off := int64(h.Ino) << 5
	if raw[off]&1 == 0 || (raw[off]>>1)&7 != 0 {
		t.Fatalf("big: i_format %#x, want an extended FLAT_PLAIN inode", raw[off])
	}
	huge := bytes.Clone(raw)
	le.PutUint64(huge[off+8:], 1<<63-1)
	le.PutUint32(huge[1028:], superChecksum(huge[:4096]))

	slash := bytes.Clone(raw)
	i := bytes.Index(slash, []byte("sl-ash"))
	if i < 0 || bytes.Count(slash, []byte("sl-ash")) != 1 {
		t.Fatal("the name sl-ash is not in the image exactly once")
	}
	slash[i+2] = '/'
	le.PutUint32(slash[1028:], superChecksum(slash[:4096]))

	for name, bad := range map[string][]byte{"i_size 2^63-1": huge, "name with /": slash} {
		im, err := Open(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Open: %v", name, err)
			}
			continue
		}
		if _, err := im.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Check = %v, want ErrCorrupt", name, err)
		}
	}
	im, _ := Open(bytes.NewReader(huge), int64(len(huge)))
	if _, err := im.Lstat("big"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("i_size 2^63-1: Lstat = %v, want ErrCorrupt", err)
	}
	im, _ = Open(bytes.NewReader(slash), int64(len(slash)))
	if _, err := im.ReadDir("."); !errors.Is(err, ErrCorrupt) {
		t.Errorf("name with /: ReadDir = %v, want ErrCorrupt", err)
	}
}
