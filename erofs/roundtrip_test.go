package erofs

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

func TestRoundTrip(t *testing.T) {
	for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
		t.Run(prof.String(), func(t *testing.T) {
			b := NewBuilder(Options{Profile: prof, MemoryLimit: 1 << 20, TempDir: t.TempDir()})
			defer b.Close()
			populate(t, b, treeSpec{BigDir: 20000, Deep: 60})
			_, img := build(t, b)
			compareTrees(t, b, img, cmpOpts{NoXattrs: prof == ProfileRuntime})
			rep := b.Report()
			if prof == ProfileRuntime && (rep.Dropped == 0 || len(rep.Warnings) == 0) {
				t.Errorf("runtime profile dropped xattrs without saying so: %+v", rep)
			}
			if prof == ProfileFull && rep.Dropped != 0 {
				t.Errorf("full profile dropped %d items: %v", rep.Dropped, rep.Warnings)
			}
			if rep.Inodes < 20000 || rep.Bytes != rep.Blocks*4096 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestDeterminism builds the same tree twice, filled in different orders
// and with different spool settings: the bytes must be identical.
func TestDeterminism(t *testing.T) {
	var imgs [][]byte
	for i, lim := range []int64{-1, 0} {
		b := NewBuilder(Options{MemoryLimit: lim, TempDir: t.TempDir()})
		if i == 1 {
			// Create and remove a decoy first: identities differ, the tree doesn't.
			if err := b.WriteFile(&sink.Header{Path: "decoy", Size: 1}, strings.NewReader("d")); err != nil {
				t.Fatal(err)
			}
		}
		populate(t, b, treeSpec{BigDir: 500, Deep: 5})
		if err := b.RemoveAll("decoy"); err != nil {
			t.Fatal(err)
		}
		raw, _ := build(t, b)
		imgs = append(imgs, raw)
		b.Close()
	}
	if !bytes.Equal(imgs[0], imgs[1]) {
		t.Fatal("same tree gave different images")
	}
}

func TestSinkContract(t *testing.T) {
	b := NewBuilder(Options{})
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Mkdir(&sink.Header{Path: "d", Mode: 0o755}))
	must(b.WriteFile(&sink.Header{Path: "d/f", Size: 2}, strings.NewReader("ab")))
	must(b.Symlink(&sink.Header{Path: "l", Linkname: "d"}))
	if err := b.WriteFile(&sink.Header{Path: "l/x"}, nil); !errors.Is(err, sink.ErrSymlinkInPath) {
		t.Errorf("write through symlink: %v", err)
	}
	if err := b.WriteFile(&sink.Header{Path: "missing/x"}, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write without parent: %v", err)
	}
	if err := b.WriteFile(&sink.Header{Path: "d"}, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("file over a directory: %v", err)
	}
	if err := b.WriteFile(&sink.Header{Path: "x", Size: 5}, strings.NewReader("abc")); err == nil {
		t.Error("short reader accepted")
	}
	if err := b.WriteFile(&sink.Header{Path: "x", Size: 5}, nil); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("nil reader: %v", err)
	}
	if err := b.Mkdir(&sink.Header{Path: "d/../e"}); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("unclean path: %v", err)
	}
	if err := b.Mkdir(&sink.Header{Path: "e", Xattrs: map[string][]byte{"os2.foo": nil}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unnameable xattr: %v", err)
	}
	if err := b.Mknod(&sink.Header{Path: "dev", Mode: sink.TypeBlock, Devmajor: 5000}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("device number too big: %v", err)
	}
	// Mkdir over a directory updates it and keeps children.
	must(b.Mkdir(&sink.Header{Path: "d", Mode: 0o700, UID: 7}))
	h, err := b.Lstat("d")
	must(err)
	if h.Mode != sink.TypeDir|0o700 || h.UID != 7 {
		t.Errorf("mkdir did not update: %+v", h)
	}
	if names, _ := b.ReadDir("d"); len(names) != 1 {
		t.Errorf("mkdir lost children: %v", names)
	}
	// A file replaces a file; a link keeps the group.
	must(b.Link("d/f", "g"))
	must(b.WriteFile(&sink.Header{Path: "d/f", Size: 1}, strings.NewReader("z")))
	if got := string(readAll(t, b, "g")); got != "ab" {
		t.Errorf("replaced file changed its old hard link: %q", got)
	}
	if h, _ := b.Lstat("g"); h.Nlink != 1 {
		t.Errorf("nlink after replace = %d", h.Nlink)
	}
	must(b.RemoveAll("d"))
	must(b.RemoveAll("d"))
	if _, err := b.Lstat("d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RemoveAll left %v", err)
	}
	// Our reader keeps the same rules.
	_, img := build(t, b)
	if _, err := img.Lstat("l/x"); !errors.Is(err, sink.ErrSymlinkInPath) {
		t.Errorf("reader followed a symlink: %v", err)
	}
	if _, err := img.Open("l"); err == nil {
		t.Error("reader opened a symlink as a file")
	}
	compareTrees(t, b, img, cmpOpts{})
}

// TestCorrupt checks that damaged superblocks are refused with the right
// sentinel.
func TestCorrupt(t *testing.T) {
	b := NewBuilder(Options{})
	defer b.Close()
	populate(t, b, treeSpec{Deep: 2})
	raw, _ := build(t, b)
	open := func(img []byte) error {
		_, err := Open(bytes.NewReader(img), int64(len(img)))
		return err
	}
	resum := func(img []byte) { le.PutUint32(img[1028:], superChecksum(img[:4096])) }
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"checksum", func(b []byte) []byte { b[2000] ^= 1; return b }, ErrCorrupt},
		{"magic", func(b []byte) []byte { b[1024] = 0; return b }, ErrCorrupt},
		{"truncated", func(b []byte) []byte { return b[:len(b)-4096] }, ErrCorrupt},
		{"tiny", func(b []byte) []byte { return b[:1100] }, ErrCorrupt},
		{"incompat", func(b []byte) []byte { b[1024+80] = 0x40; resum(b); return b }, ErrUnsupported},
		{"blocksize", func(b []byte) []byte { b[1024+12] = 30; resum(b); return b }, ErrCorrupt},
		{"rootnid", func(b []byte) []byte { le.PutUint16(b[1024+14:], 0xffff); resum(b); return b }, ErrCorrupt},
	} {
		img := tc.edit(bytes.Clone(raw))
		err := open(img)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		var fe *FormatError
		if tc.want == ErrCorrupt && !errors.As(err, &fe) {
			t.Errorf("%s: %v is not a *FormatError", tc.name, err)
		}
	}
}

// TestRuntimeWarningsQuoteNames: an image layer (a guest may have built
// it) names a file and an xattr with escape sequences and a newline; the
// runtime profile's warnings about the dropped xattr, which gvx-vol image
// add prints on the terminal, show both quoted, one line each (they were
// raw before).
func TestRuntimeWarningsQuoteNames(t *testing.T) {
	b := NewBuilder(Options{Profile: ProfileRuntime, TempDir: t.TempDir()})
	defer b.Close()
	h := &sink.Header{Path: "f\x1b[2J\nforged", Mode: sink.TypeReg | 0o644, Size: 1, Xattrs: map[string][]byte{"user.\x1b]0;x\x07": []byte("v")}}
	if err := b.WriteFile(h, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	w := b.Report().Warnings
	if len(w) != 1 {
		t.Fatalf("warnings %q, want one", w)
	}
	if strings.ContainsFunc(w[0], func(r rune) bool { return r < 0x20 || r == 0x7f }) || !strings.Contains(w[0], `"f\x1b[2J\nforged": dropped xattr "user.\x1b]0;x\a"`) {
		t.Errorf("warning %q does not quote the layer's names", w[0])
	}
}
