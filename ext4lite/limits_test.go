package ext4lite

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// limitErr fails unless err is a *LimitError unwrapping to want whose
// message names the errno.
func limitErr(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	var le *LimitError
	switch {
	case err == nil:
		t.Errorf("%s: no error, want %s", what, errnoName(want))
	case !errors.Is(err, want) || !errors.As(err, &le):
		t.Errorf("%s: %v (%T), want a *LimitError unwrapping to %s", what, err, err, errnoName(want))
	case !strings.Contains(err.Error(), errnoName(want)):
		t.Errorf("%s: %q does not name %s", what, err, errnoName(want))
	}
}

// TestXattrLimits: a value larger than one attribute can hold (65,536
// bytes; or one byte past what fits an external block beside its entry)
// is refused with E2BIG through every face (SetxattrIno, WriteFile's and
// CreateAt's headers) and nothing is stored; a name past 255 bytes is
// ERANGE; the largest value that fits is stored and read back whole.
// Before: ErrNoSpace (ENOSPC) for the values, and a 256-byte name was
// stored with e_name_len wrapped to 0.
func TestXattrLimits(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		p := ckVolume(t, 16<<20, bs, nil)
		v, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		const name = "user.big"
		max := bs - disk.XattrBlockHeaderLen - 4 - disk.XattrEntrySize(len("big"))
		f, err := v.CreateAt(RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{xattrSizeMax, max + 1} {
			val := bytes.Repeat([]byte{'v'}, n)
			limitErr(t, "SetxattrIno", v.SetxattrIno(f, name, val), syscall.E2BIG)
			if _, err := v.GetxattrIno(f, name); !errors.Is(err, syscall.ENODATA) {
				t.Errorf("bs %d, %d bytes: after the refusal Getxattr says %v, want ENODATA", bs, n, err)
			}
			h := &sink.Header{Path: "w", Mode: sink.TypeReg | 0o644, Xattrs: map[string][]byte{name: val}}
			limitErr(t, "WriteFile", v.WriteFile(h, strings.NewReader("")), syscall.E2BIG)
			if _, err := v.Lstat("w"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("bs %d: WriteFile refused but left w: %v", bs, err)
			}
			_, err := v.CreateAt(RootIno, "c", h)
			limitErr(t, "CreateAt", err, syscall.E2BIG)
		}
		long := "user." + strings.Repeat("n", disk.MaxNameLen+1)
		limitErr(t, "SetxattrIno (long name)", v.SetxattrIno(f, long, []byte("x")), syscall.ERANGE)

		val := bytes.Repeat([]byte{'m'}, max)
		if err := v.SetxattrIno(f, name, val); err != nil {
			t.Fatalf("bs %d: a %d-byte value (the largest that fits) refused: %v", bs, max, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ckFile(t, p).Err(); err != nil {
			t.Error(err)
		}
		if ckPeerCheck != nil {
			ckPeerCheck(t, p)
		}
		v, err = Open(p, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.GetxattrIno(f, name)
		v.Close()
		if err != nil || !bytes.Equal(got, val) {
			t.Errorf("bs %d: read back %d bytes, %v; want the %d written", bs, len(got), err, max)
		}
	}
}

// TestFileSizeLimits: sizes past the format's maximum ((2^32-1) blocks,
// the kernel's s_maxbytes) are EFBIG on truncate (SetAttrIno,
// File.Truncate), on write (WriteAtIno, File.WriteAt) and on create
// (WriteFile with a header size past it); a guest write across the limit
// is short, as write(2)'s; the size exactly at the limit is kept, and the
// volume stays clean. Before: SetAttrIno accepted sizes up to 2^63-1
// (e2fsck then complains) and a write past the limit was io.ErrShortWrite.
func TestFileSizeLimits(t *testing.T) {
	p := ckVolume(t, 16<<20, 4096, nil)
	v, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	max := int64(disk.MaxFileSize(4096, true))
	if max != (1<<32-1)*4096 {
		t.Fatalf("MaxFileSize(4096, huge_file) = %d", max)
	}
	f, err := v.CreateAt(RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{1<<63 - 1, 1 << 44, max + 1} {
		s := size
		limitErr(t, "SetAttrIno", v.SetAttrIno(f, SetAttr{Size: &s}), syscall.EFBIG)
	}
	if h, err := v.Stat(f); err != nil || h.Size != 0 {
		t.Fatalf("after the refusals: size %d, %v", h.Size, err)
	}
	n, err := v.WriteAtIno(f, []byte("0123456789abcdef"), max-10)
	if n != 10 || err != nil {
		t.Errorf("write across the limit: %d, %v; want 10 bytes written", n, err)
	}
	_, err = v.WriteAtIno(f, []byte("x"), max)
	limitErr(t, "WriteAtIno at the limit", err, syscall.EFBIG)
	h := &sink.Header{Path: "huge", Mode: sink.TypeReg | 0o644, Size: max + 1}
	limitErr(t, "WriteFile", v.WriteFile(h, strings.NewReader("")), syscall.EFBIG)
	if _, err := v.Lstat("huge"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFile refused but left huge: %v", err)
	}
	of, err := v.OpenFile("f")
	if err != nil {
		t.Fatal(err)
	}
	limitErr(t, "File.Truncate", of.Truncate(max+1), syscall.EFBIG)
	_, err = of.WriteAt([]byte("y"), max)
	limitErr(t, "File.WriteAt", err, syscall.EFBIG)
	if st, err := v.Stat(f); err != nil || st.Size != max {
		t.Errorf("size %d, %v; want the limit %d", st.Size, err, max)
	}
	buf := make([]byte, 10)
	if n, err := v.ReadAtIno(f, buf, max-10); n != 10 || string(buf) != "0123456789" {
		t.Errorf("read back %q (%d, %v)", buf[:n], n, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ckFile(t, p).Err(); err != nil {
		t.Error(err)
	}
	if ckPeerCheck != nil {
		ckPeerCheck(t, p)
	}
}

// TestMaxDirSize: a directory larger than Options.MaxDirSize is refused
// with EFBIG before any of its blocks is read — here a real 3-block
// directory opened with a 2-block limit, and a directory whose i_size a
// hostile volume set to 1 TiB under the default limit (before, the reader
// walked its blocks until the first hole).
func TestMaxDirSize(t *testing.T) {
	v, p := newVolume(t, 8<<20)
	bs := v.BlockSize()
	if err := v.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*bs/40; i++ {
		name := "d/" + strings.Repeat("n", 24) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
		if err := v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644}, strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
	}
	ino, err := v.Lookup(RootIno, "d")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	im := ckLoad(t, p)
	if sz := im.inode(uint32(ino)).Size(); sz < 3*uint64(bs) {
		t.Fatalf("the directory has %d bytes, want at least 3 blocks", sz)
	}
	w, err := Open(p, &Options{ReadOnly: true, MaxDirSize: 2 * int64(bs)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.ReadDir("d")
	limitErr(t, "ReadDir past MaxDirSize", err, syscall.EFBIG)
	w.Close()

	in := im.inode(uint32(ino))
	in.SetSize(1 << 40)
	im.putInode(uint32(ino), in)
	if err := os.WriteFile(p, im.b, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err = Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = w.ReadDir("d")
	limitErr(t, "ReadDir of a 1 TiB directory", err, syscall.EFBIG)
}
