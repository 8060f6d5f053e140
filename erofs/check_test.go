package erofs

import (
	"bytes"
	"errors"
	"testing"
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
