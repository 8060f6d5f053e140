package ext4lite

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/sink"
)

func TestInodeAPI(t *testing.T) {
	v, _ := newVolume(t, 64<<20)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := v.CreateAt(RootIno, "d", &sink.Header{Mode: sink.TypeDir | 0o755})
	must(err)
	f, err := v.CreateAt(d, "f", &sink.Header{Mode: sink.TypeReg | 0o600, UID: 1000, GID: 1000})
	must(err)
	if _, err := v.CreateAt(d, "f", &sink.Header{Mode: sink.TypeReg}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over an existing name: %v", err)
	}
	if _, err := v.WriteAtIno(f, []byte("hello"), 3); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := v.ReadAtIno(f, buf, 0); err != nil || n != 8 || !bytes.Equal(buf, []byte("\x00\x00\x00hello")) {
		t.Fatalf("read %d %q %v", n, buf, err)
	}
	// A handle survives renaming the directory above it.
	must(v.RenameAt(RootIno, "d", RootIno, "e", 0))
	if h, err := v.Stat(f); err != nil || h.Size != 8 || h.UID != 1000 {
		t.Fatalf("stat after rename: %+v %v", h, err)
	}
	if got, err := v.Lookup(RootIno, "e"); err != nil || got != d {
		t.Fatalf("lookup e = %d %v", got, err)
	}
	if p, err := v.Lookup(d, ".."); err != nil || p != RootIno {
		t.Fatalf("lookup .. = %d %v", p, err)
	}
	// Exchange a file and a directory.
	s, err := v.CreateAt(RootIno, "s", &sink.Header{Mode: sink.TypeSymlink, Linkname: "e/f"})
	must(err)
	must(v.RenameAt(RootIno, "s", d, "f", RenameExchange))
	if got, _ := v.Lookup(d, "f"); got != s {
		t.Fatal("exchange did not swap")
	}
	if got, _ := v.Lookup(RootIno, "s"); got != f {
		t.Fatal("exchange did not swap back")
	}
	if err := v.RenameAt(RootIno, "s", d, "f", RenameNoReplace); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("NoReplace over an entry: %v", err)
	}
	// Moving a directory below itself is refused.
	sub, err := v.CreateAt(d, "sub", &sink.Header{Mode: sink.TypeDir | 0o755})
	must(err)
	if err := v.RenameAt(RootIno, "e", sub, "loop", 0); err == nil {
		t.Fatal("moved a directory below itself")
	}
	must(v.SetxattrIno(f, "trusted.overlay.opaque", []byte("y")))
	if val, err := v.GetxattrIno(f, "trusted.overlay.opaque"); err != nil || string(val) != "y" {
		t.Fatalf("getxattr %q %v", val, err)
	}
	must(v.RemovexattrIno(f, "trusted.overlay.opaque"))
	mode := uint32(0o4755)
	size := int64(2)
	must(v.SetAttrIno(f, SetAttr{Mode: &mode, Size: &size}))
	if h, _ := v.Stat(f); h.Mode != sink.TypeReg|0o4755 || h.Size != 2 {
		t.Fatalf("setattr: %+v", h)
	}
	must(v.LinkAt(f, d, "hard"))
	if h, _ := v.Stat(f); h.Nlink != 2 {
		t.Fatalf("nlink %d", h.Nlink)
	}
	must(v.UnlinkAt(d, "hard", false))
	if err := v.UnlinkAt(RootIno, "e", true); !errors.Is(err, errNotEmpty) {
		t.Fatalf("rmdir of a non-empty dir: %v", err)
	}
	rep, err := v.Check(nil)
	must(err)
	if len(rep.Findings) > 0 {
		t.Fatal(rep.Findings)
	}
}

// TestOpenUnlinked: a file unlinked while referenced stays readable and
// writable until Unref; a crash while it is open leaves it on the orphan
// list, and the next open frees it.
func TestOpenUnlinked(t *testing.T) {
	v, p := newVolume(t, 64<<20)
	f, err := v.CreateAt(RootIno, "tmp", &sink.Header{Mode: sink.TypeReg | 0o600})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("z"), 1<<20)
	if _, err := v.WriteAtIno(f, data, 0); err != nil {
		t.Fatal(err)
	}
	free0 := v.StatFS().FreeBlocks
	v.Ref(f)
	if err := v.UnlinkAt(RootIno, "tmp", false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lookup(RootIno, "tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("name still there")
	}
	buf := make([]byte, 10)
	if _, err := v.ReadAtIno(f, buf, 100); err != nil || string(buf) != "zzzzzzzzzz" {
		t.Fatalf("read of an open unlinked file: %q %v", buf, err)
	}
	if _, err := v.WriteAtIno(f, []byte("still"), 0); err != nil {
		t.Fatal(err)
	}
	if free := v.StatFS().FreeBlocks; free != free0 {
		t.Fatalf("blocks freed while the file is open: %d -> %d", free0, free)
	}
	// Crash now (the sync makes the orphan durable), on a copy.
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(p)
	crashed := p + ".crashed"
	os.WriteFile(crashed, img, 0o644)
	if err := v.Unref(f); err != nil {
		t.Fatal(err)
	}
	if free := v.StatFS().FreeBlocks; free <= free0 {
		t.Fatalf("blocks not freed at the last unref: %d -> %d", free0, free)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(crashed, nil) // frees the orphan
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	noSpaceE2fsck(t, crashed)
	noSpaceE2fsck(t, p)
}

func TestFileExtents(t *testing.T) {
	v, p := newVolume(t, 64<<20)
	f, err := v.CreateAt(RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 3*4096+100)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	v.WriteAtIno(f, want[:4096], 0)
	v.WriteAtIno(f, want[8192:], 8192) // a hole at block 1
	copy(want[4096:8192], make([]byte, 4096))
	exts, err := v.FileExtents(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(p)
	got := make([]byte, len(want))
	var covered int64
	for _, e := range exts {
		copy(got[e.Offset:e.Offset+e.Length], img[e.VolumeAt:e.VolumeAt+e.Length])
		covered += e.Length
	}
	if !bytes.Equal(got, want) || covered != int64(len(want))-4096 {
		t.Fatalf("extents %+v do not reproduce the file", exts)
	}
}

// TestXattrNameWithNUL: the volume server passes a guest's setxattr name
// through; one holding a NUL (no Linux name can: a hand-made lisafs request)
// is refused with EINVAL, through every setter, instead of being stored
// where no tar can carry it and the volume's export fails. A name with "="
// is Linux's and stays.
func TestXattrNameWithNUL(t *testing.T) {
	v, _ := newVolume(t, 64<<20)
	f, err := v.CreateAt(RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SetxattrIno(f, "user.a\x00b", []byte("v")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("SetxattrIno with a NUL in the name: %v, want EINVAL", err)
	}
	if _, err := v.CreateAt(RootIno, "g", &sink.Header{Mode: sink.TypeReg | 0o644, Xattrs: map[string][]byte{"user.\x00": nil}}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateAt with a NUL in an xattr name: %v, want EINVAL", err)
	}
	if err := v.SetxattrIno(f, "user.a=b", []byte("v")); err != nil {
		t.Errorf("SetxattrIno user.a=b: %v", err)
	}
	if names, _ := v.ListxattrIno(f); len(names) != 1 || names[0] != "user.a=b" {
		t.Errorf("xattrs %q, want just user.a=b", names)
	}
}

// TestSymlinkTargetWithNUL: a symlink whose target holds a NUL (no Linux
// link can: symlink(2) takes a C string; a hand-made lisafs request could
// ask) is refused with EINVAL by both the inode and the path API, instead
// of being stored where no tar can carry it and the volume's export fails.
func TestSymlinkTargetWithNUL(t *testing.T) {
	v, _ := newVolume(t, 64<<20)
	if _, err := v.CreateAt(RootIno, "l", &sink.Header{Mode: sink.TypeSymlink, Linkname: "a\x00b"}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateAt of a symlink to a\\x00b: %v, want EINVAL", err)
	}
	if err := v.Symlink(&sink.Header{Path: "m", Mode: sink.TypeSymlink, Linkname: "\x00"}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Symlink to \\x00: %v, want EINVAL", err)
	}
	if _, err := v.CreateAt(RootIno, "ok", &sink.Header{Mode: sink.TypeSymlink, Linkname: "../a b\x1b"}); err != nil {
		t.Errorf("a target with other bytes: %v", err)
	}
}
