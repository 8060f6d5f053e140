package sinktest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

func TestMemFSConformance(t *testing.T) {
	Conformance(t, func() (sink.Sink, sink.Source) {
		m := NewMemFS()
		return m, m
	})
}

func TestMemFSHolesCostNothing(t *testing.T) {
	m := NewMemFS()
	if err := EdgeTree(m, TreeOptions{HugeSparse: true}); err != nil {
		t.Fatal(err)
	}
	h, err := m.Lstat("sparse/past-5GiB")
	if err != nil {
		t.Fatal(err)
	}
	if h.Size <= 5<<30 {
		t.Fatalf("size %d", h.Size)
	}
	if m.DataBytes() > 4<<20 {
		t.Errorf("MemFS holds %d bytes of data for a sparse tree", m.DataBytes())
	}
}

func TestMemFSMaxBytes(t *testing.T) {
	m := NewMemFS()
	m.MaxBytes = 10000
	h := &sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 20000}
	if err := m.WriteFile(h, bytes.NewReader(bytes.Repeat([]byte{1}, 20000))); !errors.Is(err, ErrFull) {
		t.Fatalf("WriteFile beyond MaxBytes = %v, want ErrFull", err)
	}
	h.Size = 1 << 40 // all zeros: holes cost nothing, so no ErrFull
	if err := m.WriteFile(h, &tailReader{size: 1 << 20, dataFrom: 1 << 20}); err == nil {
		t.Fatalf("short reader accepted")
	}
}

func TestRandomTreeReproducible(t *testing.T) {
	a, b := NewMemFS(), NewMemFS()
	if err := RandomTree(a, rand.New(rand.NewPCG(7, 7)), TreeOptions{Entries: 500}); err != nil {
		t.Fatal(err)
	}
	if err := RandomTree(b, rand.New(rand.NewPCG(7, 7)), TreeOptions{Entries: 500}); err != nil {
		t.Fatal(err)
	}
	if err := Compare(a, b, CompareOptions{}); err != nil {
		t.Fatal(err)
	}
	c := NewMemFS()
	if err := RandomTree(c, rand.New(rand.NewPCG(8, 8)), TreeOptions{Entries: 500}); err != nil {
		t.Fatal(err)
	}
	if Compare(a, c, CompareOptions{}) == nil {
		t.Fatal("different seeds made equal trees")
	}
	// The generator must actually produce what it promises.
	kinds := map[string]int{}
	var walk func(p string)
	walk = func(p string) {
		h, _ := a.Lstat(p)
		kinds[typeName(h.Mode)]++
		if h.Nlink > 1 && h.Type() != sink.TypeDir {
			kinds["hardlink"]++
		}
		if len(h.Xattrs) > 0 {
			kinds["xattr"]++
		}
		if h.Mode&(sink.ModeSetuid|sink.ModeSticky) != 0 {
			kinds["setuid/sticky"]++
		}
		if h.UID > 65535 {
			kinds["bigid"]++
		}
		if strings.Contains(p, "\n") {
			kinds["newline"]++
		}
		if h.Type() == sink.TypeDir {
			names, _ := a.ReadDir(p)
			for _, n := range names {
				walk(join(p, n))
			}
		}
	}
	walk(".")
	for _, k := range []string{"file", "dir", "symlink", "chardev", "blockdev", "fifo", "socket", "hardlink", "xattr", "setuid/sticky", "bigid", "newline"} {
		if kinds[k] == 0 {
			t.Errorf("RandomTree made no %s (made %v)", k, kinds)
		}
	}
}

// TestCompareFindsEveryDifference mutates one property at a time and checks
// that Compare reports it, and that the matching option silences it.
func TestCompareFindsEveryDifference(t *testing.T) {
	base := func() *MemFS {
		m := NewMemFS()
		if err := EdgeTree(m, TreeOptions{}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	ref := base()
	if err := Compare(ref, base(), CompareOptions{}); err != nil {
		t.Fatalf("equal trees differ: %v", err)
	}
	rewrite := func(p string, mod func(h *sink.Header)) func(m *MemFS) error {
		return func(m *MemFS) error {
			h, err := m.Lstat(p)
			if err != nil {
				return err
			}
			mod(h)
			switch h.Type() {
			case sink.TypeDir:
				return m.Mkdir(h)
			case sink.TypeReg:
				r, _ := ref.Open(p)
				return m.WriteFile(h, r)
			case sink.TypeSymlink:
				return m.Symlink(h)
			default:
				return m.Mknod(h)
			}
		}
	}
	cases := []struct {
		name   string
		mutate func(m *MemFS) error
		want   string
		quiet  CompareOptions // options under which the difference is ignored
	}{
		{"mode", rewrite("modes/file-4755", func(h *sink.Header) { h.Mode &^= sink.ModeSetuid }), "mode 4755 vs 0755", CompareOptions{}},
		{"sticky", rewrite("modes/sticky", func(h *sink.Header) { h.Mode &^= sink.ModeSticky }), "mode 1777 vs 0777", CompareOptions{}},
		{"uid", rewrite("owners/65536-65537", func(h *sink.Header) { h.UID = 0 }), "owner", CompareOptions{IgnoreOwner: true}},
		{"mtime-ns", rewrite("times/ns-max", func(h *sink.Header) { h.Mtime = h.Mtime.Add(-1) }), "mtime", CompareOptions{IgnoreMtime: true}},
		{"atime", rewrite("times/epoch", func(h *sink.Header) { h.Atime = time.Unix(5, 0) }), "atime", CompareOptions{IgnoreAtime: true}},
		{"ctime", rewrite("times/epoch", func(h *sink.Header) { h.Ctime = time.Unix(5, 0) }), "ctime", CompareOptions{IgnoreCtime: true}},
		{"crtime", rewrite("times/epoch", func(h *sink.Header) { h.Crtime = time.Unix(5, 0) }), "crtime", CompareOptions{IgnoreCrtime: true}},
		{"root", rewrite(".", func(h *sink.Header) { h.Mode = sink.TypeDir | 0o700 }), ".: mode", CompareOptions{IgnoreRoot: true}},
		{"xattr-value", rewrite("xattrs/binary", func(h *sink.Header) { h.Xattrs["user.bin"] = []byte{0} }), "xattr user.bin", CompareOptions{IgnoreXattrPrefixes: []string{"user."}}},
		{"xattr-gone", rewrite("xattrs/empty", func(h *sink.Header) { h.Xattrs = nil }), "xattr user.empty only in a", CompareOptions{IgnoreXattrPrefixes: []string{"user.e"}}},
		{"symlink", rewrite("links/fast", func(h *sink.Header) { h.Linkname = "other" }), "symlink target", CompareOptions{}},
		{"symlink-perm", rewrite("links/fast", func(h *sink.Header) { h.Mode = sink.TypeSymlink | 0o755 }), "mode", CompareOptions{IgnoreSymlinkPerm: true}},
		{"rdev", rewrite("dev/null", func(h *sink.Header) { h.Devminor = 5 }), "device 1:3 vs 1:5", CompareOptions{}},
		{"type", func(m *MemFS) error {
			return m.Mknod(&sink.Header{Path: "dev/fifo", Mode: sink.TypeSocket | 0o644, Mtime: time.Unix(1700000000, 123456789), Atime: time.Unix(1700000000, 123456789)})
		}, "type fifo vs socket", CompareOptions{}},
		{"content", func(m *MemFS) error {
			return m.WriteFile(&sink.Header{Path: "sizes/4097", Mode: sink.TypeReg | 0o644, Size: 4097, Mtime: time.Unix(1700000000, 123456789), Atime: time.Unix(1700000000, 123456789)}, bytes.NewReader(make([]byte, 4097)))
		}, "content differs at byte", CompareOptions{}},
		{"size", rewrite("sizes/0", func(h *sink.Header) {}), "", CompareOptions{}}, // no change
		{"missing", func(m *MemFS) error { return m.RemoveAll("deep/d00/d01") }, "deep/d00/d01: only in a", CompareOptions{}},
		{"extra", func(m *MemFS) error { return m.Mknod(&sink.Header{Path: "extra", Mode: sink.TypeFifo}) }, "extra: only in b", CompareOptions{}},
		{"hardlink", func(m *MemFS) error {
			r, _ := ref.Open("links/b/second")
			h, _ := ref.Lstat("links/b/second")
			return m.WriteFile(h, r)
		}, "hard-linked", CompareOptions{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			if err := tc.mutate(m); err != nil {
				t.Fatal(err)
			}
			err := Compare(ref, m, CompareOptions{})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("no change, but: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compare = %v, want a difference mentioning %q", err, tc.want)
			}
			if !reflect.DeepEqual(tc.quiet, CompareOptions{}) {
				if err := Compare(ref, m, tc.quiet); err != nil {
					t.Errorf("with %+v: %v", tc.quiet, err)
				}
			}
		})
	}
}

func TestCompareMaxDiffs(t *testing.T) {
	a, b := NewMemFS(), NewMemFS()
	if err := EdgeTree(a, TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	err := Compare(a, b, CompareOptions{MaxDiffs: 3, IgnoreRoot: true})
	var de *DiffError
	if !errors.As(err, &de) || len(de.Diffs) != 3 || !de.Truncated {
		t.Fatalf("Compare = %v", err)
	}
}

func TestEdgeTreeHugeDir(t *testing.T) {
	if testing.Short() {
		t.Skip("100 000 entries")
	}
	m := NewMemFS()
	if err := EdgeTree(m, TreeOptions{HugeDir: true}); err != nil {
		t.Fatal(err)
	}
	names, err := m.ReadDir("huge")
	if err != nil || len(names) != 100000 {
		t.Fatalf("huge: %d entries, %v", len(names), err)
	}
}

func TestCompareSpecialHardLinks(t *testing.T) {
	a, b := NewMemFS(), NewMemFS()
	for _, m := range []*MemFS{a, b} {
		m.Mknod(&sink.Header{Path: "p", Mode: sink.TypeFifo | 0o644})
	}
	a.Link("p", "q")
	b.Mknod(&sink.Header{Path: "q", Mode: sink.TypeFifo | 0o644})
	if err := Compare(a, b, CompareOptions{}); err == nil || !strings.Contains(err.Error(), "hard-linked") {
		t.Fatalf("Compare = %v, want a hard-link difference", err)
	}
	if err := Compare(a, b, CompareOptions{IgnoreSpecialHardLinks: true}); err != nil {
		t.Fatal(err)
	}
}
