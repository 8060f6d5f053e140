package ext4lite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestNoSpace fills a small volume until it refuses, then checks the error
// wraps ErrNoSpace, the half-written file is gone, what was written before
// is intact, and the volume is consistent (own check; e2fsck in the linux
// test).
func TestNoSpace(t *testing.T) {
	v, p := newVolume(t, 8<<20)
	data := bytes.Repeat([]byte{0xAB}, 700<<10)
	var written []string
	var err error
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("f%03d", i)
		err = v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, bytes.NewReader(data))
		if err != nil {
			if _, serr := v.Lstat(name); serr == nil {
				t.Errorf("%s exists after a failed write", name)
			}
			break
		}
		written = append(written, name)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("filling the volume: %v, want ErrNoSpace", err)
	}
	// Small files still fit in what is left? Either way no corruption.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, n := range written {
		f, err := r.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: content changed", n)
		}
	}
	rep, err := r.Check(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 {
		t.Fatalf("check after ENOSPC: %v", rep.Findings)
	}
	noSpaceE2fsck(t, p)
}

// TestXattrTooLarge: attributes that cannot fit the inode plus one block
// are refused by the call that sets them, and nothing is created: one
// value no attribute can hold is E2BIG (TestXattrLimits), values that fit
// alone but not together are ErrNoSpace.
func TestXattrTooLarge(t *testing.T) {
	v, _ := newVolume(t, 64<<20)
	big := map[string][]byte{"user.big": bytes.Repeat([]byte("x"), 5000)}
	err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Xattrs: big}, bytes.NewReader(nil))
	if !errors.Is(err, syscall.E2BIG) {
		t.Fatalf("WriteFile with a 5000-byte xattr: %v, want E2BIG", err)
	}
	two := map[string][]byte{"user.a": bytes.Repeat([]byte("x"), 3000), "user.b": bytes.Repeat([]byte("x"), 3000)}
	err = v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Xattrs: two}, bytes.NewReader(nil))
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("WriteFile with two 3000-byte xattrs: %v, want ErrNoSpace", err)
	}
	if _, err := v.Lstat("f"); err == nil {
		t.Fatal("the file was created anyway")
	}
	if err := v.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := v.Setxattr("d", "user.big", big["user.big"]); !errors.Is(err, syscall.E2BIG) {
		t.Fatalf("Setxattr of 5000 bytes: %v, want E2BIG", err)
	}
	if err := v.Setxattr("d", "user.ok", bytes.Repeat([]byte("y"), 3000)); err != nil {
		t.Fatal(err)
	}
	if err := v.Setxattr("d", "user.ok2", bytes.Repeat([]byte("y"), 3000)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a second 3000-byte value: %v, want ErrNoSpace", err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestNoSpaceAfterDelete: the space a deleted file held is usable by the
// next write, through WriteAtIno (the volume server's path), File.WriteAt
// and WriteFile, without waiting for a sync. Freed blocks are held until
// the transaction freeing them commits; before, a write right after the
// delete failed with ENOSPC until the next periodic sync (~3 s in a
// guest).
func TestNoSpaceAfterDelete(t *testing.T) {
	for _, face := range []string{"WriteAtIno", "File.WriteAt", "WriteFile"} {
		t.Run(face, func(t *testing.T) {
			v, _ := newVolume(t, 16<<20)
			defer v.Close()
			bs := int64(v.BlockSize())
			size := (int64(v.StatFS().FreeBlocks) - 64) * bs
			data := bytes.Repeat([]byte("d"), int(size))
			if err := v.WriteFile(&sink.Header{Path: "a", Mode: sink.TypeReg | 0o644, Size: size}, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if err := v.Remove("a"); err != nil {
				t.Fatal(err)
			}
			var err error
			switch face {
			case "WriteFile":
				err = v.WriteFile(&sink.Header{Path: "b", Mode: sink.TypeReg | 0o644, Size: size}, bytes.NewReader(data))
			default:
				var ino Ino
				if ino, err = v.CreateAt(RootIno, "b", &sink.Header{Mode: sink.TypeReg | 0o644}); err != nil {
					t.Fatal(err)
				}
				f, ferr := v.OpenFile("b")
				if ferr != nil {
					t.Fatal(ferr)
				}
				for off := int64(0); off < size && err == nil; off += 256 << 10 {
					chunk := data[off:min(size, off+256<<10)]
					if face == "WriteAtIno" {
						_, err = v.WriteAtIno(ino, chunk, off)
					} else {
						_, err = f.WriteAt(chunk, off)
					}
				}
			}
			if err != nil {
				t.Fatalf("writing the deleted file's size again: %v", err)
			}
		})
	}
}
