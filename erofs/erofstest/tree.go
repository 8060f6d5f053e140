// Package erofstest holds the hostile tree generator and the tree
// comparison that erofs's tests, its cross-checks and gvx-vol's tests share.
package erofstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TreeSpec sizes a hostile tree.
type TreeSpec struct {
	BigDir int  // entries in the one huge directory (0: none)
	Deep   int  // nesting depth
	Mkfs15 bool // what mkfs.erofs 1.5 can take: names below 255 bytes
}

// ACL is a minimal valid POSIX ACL xattr value (version 2: user::rw-,
// group::r--, other::r--), which the kernel parses on getxattr.
func ACL() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range [][3]uint32{{1, 6, ^uint32(0)}, {4, 4, ^uint32(0)}, {0x20, 4, ^uint32(0)}} {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

func Payload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// Populate writes a hostile tree into s: every file type, names of 255
// bytes and of UTF-8, names that sort before ".", block-boundary sizes,
// hard-link groups, many, large and shared xattrs, ns mtimes, ids above
// 65535, deep nesting and optionally one huge directory.
func Populate(t testing.TB, s sink.Sink, spec TreeSpec) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tm := func(i int) time.Time { return time.Unix(1700000000+int64(i), int64(i*7919)%1e9) }
	epoch := time.Unix(1600000000, 0)
	file := func(p string, mode uint32, data []byte, i int, x map[string][]byte) {
		t.Helper()
		must(s.WriteFile(&sink.Header{Path: p, Mode: sink.TypeReg | mode, UID: uint32(i % 3), GID: uint32(i % 5),
			Size: int64(len(data)), Mtime: tm(i), Xattrs: x}, bytes.NewReader(data)))
	}
	dir := func(p string, mode uint32, i int, x map[string][]byte) {
		t.Helper()
		must(s.Mkdir(&sink.Header{Path: p, Mode: sink.TypeDir | mode, UID: 1000, GID: 1000, Mtime: tm(i), Xattrs: x}))
	}
	must(s.Mkdir(&sink.Header{Path: ".", Mode: sink.TypeDir | 0o755, Mtime: epoch}))
	dir("sizes", 0o755, 1, nil)
	for i, n := range []int{0, 1, 100, 4095, 4096, 4097, 8191, 8192, 8193, 3*4096 + 1, 1<<20 + 123} {
		file(fmt.Sprintf("sizes/f%07d", n), 0o644, Payload(uint64(n), n), i, nil)
	}
	// Inline tails that cannot share a block with their inode.
	file("sizes/tail4000", 0o644, Payload(7, 4000), 3, nil)
	file("sizes/tail4060", 0o644, Payload(8, 2*4096+4060), 4, map[string][]byte{"user.k": []byte("v")})

	dir("names", 0o755, 2, nil)
	long := strings.Repeat("n", 255)
	if spec.Mkfs15 {
		long = strings.Repeat("n", 254)
	}
	for i, name := range []string{long, "日本語のファイル名", "ÆØÅ-blåbær", "!bang", "-dash", "+plus", ".hidden", "..dots", "z", "\x01ctl", "sp ace"} {
		file("names/"+name, 0o600, []byte(name), i, nil)
	}
	dir("names/"+strings.Repeat("d", 200), 0o700, 5, nil)

	dir("special", 0o755, 3, nil)
	must(s.Mknod(&sink.Header{Path: "special/null", Mode: sink.TypeChar | 0o666, Devmajor: 1, Devminor: 3, Mtime: tm(4)}))
	must(s.Mknod(&sink.Header{Path: "special/sda", Mode: sink.TypeBlock | 0o660, GID: 6, Devmajor: 8, Devminor: 0, Mtime: tm(5)}))
	must(s.Mknod(&sink.Header{Path: "special/bigdev", Mode: sink.TypeChar | 0o600, Devmajor: 4095, Devminor: 1<<20 - 1, Mtime: tm(6)}))
	must(s.Mknod(&sink.Header{Path: "special/whiteout", Mode: sink.TypeChar, Mtime: epoch}))
	must(s.Mknod(&sink.Header{Path: "special/fifo", Mode: sink.TypeFifo | 0o644, Mtime: tm(7)}))
	must(s.Mknod(&sink.Header{Path: "special/sock", Mode: sink.TypeSocket | 0o755, Mtime: tm(8)}))
	must(s.Symlink(&sink.Header{Path: "special/link", Mode: sink.TypeSymlink | 0o777, Linkname: "../sizes/f0000001", Mtime: tm(9)}))
	must(s.Symlink(&sink.Header{Path: "special/longlink", Mode: sink.TypeSymlink | 0o777, Linkname: strings.Repeat("x/", 2047) + "y", Mtime: tm(10)}))
	must(s.Symlink(&sink.Header{Path: "special/tlink", Mode: sink.TypeSymlink | 0o777, Linkname: "t", UID: 70000, GID: 80000, Mtime: tm(11),
		Xattrs: map[string][]byte{"trusted.overlay.redirect": []byte("/x")}}))

	dir("ids", 0o755, 4, nil)
	must(s.WriteFile(&sink.Header{Path: "ids/big", Mode: sink.TypeReg | 0o4755, UID: 100000, GID: 4294967294, Size: 3, Mtime: tm(12)}, strings.NewReader("big")))
	must(s.WriteFile(&sink.Header{Path: "ids/epoch", Mode: sink.TypeReg | 0o644, Size: 1, Mtime: epoch}, strings.NewReader("e")))
	must(s.WriteFile(&sink.Header{Path: "ids/old", Mode: sink.TypeReg | 0o644, Size: 1, Mtime: time.Unix(-86400*365, 5)}, strings.NewReader("o")))
	must(s.Mkdir(&sink.Header{Path: "ids/sticky", Mode: sink.TypeDir | 0o1777, UID: 65536, GID: 65535, Mtime: tm(13)}))

	dir("links", 0o755, 5, nil)
	file("links/a", 0o644, []byte("hard"), 14, map[string][]byte{"user.h": []byte("1")})
	must(s.Link("links/a", "links/b"))
	must(s.Link("links/a", "sizes/c-link"))
	must(s.Mknod(&sink.Header{Path: "links/fifo", Mode: sink.TypeFifo | 0o600, Mtime: tm(15)}))
	must(s.Link("links/fifo", "links/fifo2"))

	dir("xattrs", 0o755, 6, map[string][]byte{"trusted.overlay.opaque": []byte("y")})
	many := map[string][]byte{}
	for i := range 60 {
		many[fmt.Sprintf("user.attr%03d", i)] = []byte(strings.Repeat("v", i))
	}
	many["trusted.overlay.origin"] = Payload(1, 30)
	// A valid VFS_CAP_REVISION_2 blob (the kernel checks it on getxattr):
	// effective, CAP_NET_BIND_SERVICE permitted.
	many["security.capability"] = []byte{1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	many["system.posix_acl_access"] = ACL()
	file("xattrs/many", 0o644, []byte("m"), 16, many)
	file("xattrs/large", 0o644, nil, 17, map[string][]byte{"user.large": Payload(3, 60000), "trusted." + strings.Repeat("t", 200): []byte("long name")})
	for i := range 5 {
		file(fmt.Sprintf("xattrs/shared%d", i), 0o644, []byte{byte(i)}, 18+i, map[string][]byte{
			"security.selinux": []byte("system_u:object_r:container_file_t:s0\x00"),
			"user.same":        []byte("shared value"),
			"user.own":         []byte{byte(i)},
		})
	}
	must(s.Mkdir(&sink.Header{Path: "xattrs/acldir", Mode: sink.TypeDir | 0o755, Mtime: tm(25),
		Xattrs: map[string][]byte{"system.posix_acl_default": ACL(), "system.posix_acl_access": ACL()}}))

	p := "deep"
	dir(p, 0o755, 26, nil)
	for i := range spec.Deep {
		p += fmt.Sprintf("/level%02d", i)
		dir(p, 0o755, 27+i, nil)
	}
	file(p+"/bottom", 0o644, []byte("bottom"), 99, nil)

	if spec.BigDir > 0 {
		dir("big", 0o755, 100, nil)
		for i := range spec.BigDir {
			must(s.WriteFile(&sink.Header{Path: fmt.Sprintf("big/entry-%06d", i), Mode: sink.TypeReg | 0o644, Mtime: epoch}, nil))
		}
	}
	dir("empty", 0o700, 101, nil)
}

type CmpOpts struct {
	NoXattrs     bool // the runtime profile drops them
	IgnoreRoot   bool
	IgnoreNlink  bool
	IgnoreMtime  bool
	IgnoreLinks  bool // hard-link groups
	IgnoreSetid  bool // setuid/setgid bits
	IgnoreXattrs func(name string) bool
}

// Compare checks that got shows exactly want: names, mode, owner,
// size, content, symlink target, device numbers, mtime to the ns, xattrs,
// nlink and hard-link groups.
func Compare(t testing.TB, want, got sink.Source, o CmpOpts) {
	t.Helper()
	inoMap := map[uint64]uint64{} // want Ino → got Ino
	gotSeen := map[uint64]uint64{}
	diffs := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		diffs++
		if diffs <= 30 {
			t.Errorf(format, args...)
		}
	}
	var walk func(p string)
	walk = func(p string) {
		wh, err := want.Lstat(p)
		if err != nil {
			t.Fatalf("want %s: %v", p, err)
		}
		gh, err := got.Lstat(p)
		if err != nil {
			errorf("%s: %v", p, err)
			return
		}
		if !(o.IgnoreRoot && p == ".") {
			compareHeaders(p, wh, gh, o, errorf)
		}
		if wh.Type() != sink.TypeDir && !o.IgnoreLinks {
			if g, ok := inoMap[wh.Ino]; ok && g != gh.Ino {
				errorf("%s: hard link group split (ino %d, want %d)", p, gh.Ino, g)
			}
			if w, ok := gotSeen[gh.Ino]; ok && w != wh.Ino {
				errorf("%s: separate files merged into ino %d", p, gh.Ino)
			}
			inoMap[wh.Ino], gotSeen[gh.Ino] = gh.Ino, wh.Ino
		}
		switch wh.Type() {
		case sink.TypeReg:
			wb, gb := ReadAll(t, want, p), ReadAll(t, got, p)
			if !bytes.Equal(wb, gb) {
				errorf("%s: content differs (%d vs %d bytes)", p, len(gb), len(wb))
			}
		case sink.TypeDir:
			wn, err := want.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			gn, err := got.ReadDir(p)
			if err != nil {
				errorf("readdir %s: %v", p, err)
				return
			}
			if !slices.Equal(wn, gn) {
				errorf("%s: entries differ: %d vs want %d", p, len(gn), len(wn))
				return
			}
			for _, n := range wn {
				walk(path.Join(p, n))
			}
		}
	}
	walk(".")
	if diffs > 30 {
		t.Errorf("… %d differences in all", diffs)
	}
}

func compareHeaders(p string, w, g *sink.Header, o CmpOpts, errorf func(string, ...any)) {
	if wm, gm := w.Mode, g.Mode; o.IgnoreSetid && wm&^(sink.ModeSetuid|sink.ModeSetgid) != gm&^(sink.ModeSetuid|sink.ModeSetgid) ||
		!o.IgnoreSetid && wm != gm {
		errorf("%s: mode %#o, want %#o", p, g.Mode, w.Mode)
	}
	if w.UID != g.UID || w.GID != g.GID {
		errorf("%s: owner %d:%d, want %d:%d", p, g.UID, g.GID, w.UID, w.GID)
	}
	if w.Type() == sink.TypeReg && w.Size != g.Size {
		errorf("%s: size %d, want %d", p, g.Size, w.Size)
	}
	if w.Linkname != g.Linkname {
		errorf("%s: link target %.40q, want %.40q", p, g.Linkname, w.Linkname)
	}
	if w.Devmajor != g.Devmajor || w.Devminor != g.Devminor {
		errorf("%s: device %d:%d, want %d:%d", p, g.Devmajor, g.Devminor, w.Devmajor, w.Devminor)
	}
	if !o.IgnoreMtime && !w.Mtime.Equal(g.Mtime) {
		errorf("%s: mtime %v, want %v", p, g.Mtime, w.Mtime)
	}
	if !o.IgnoreNlink && w.Nlink != g.Nlink {
		errorf("%s: nlink %d, want %d", p, g.Nlink, w.Nlink)
	}
	wx := maps.Clone(w.Xattrs)
	gx := maps.Clone(g.Xattrs)
	if o.NoXattrs {
		wx = nil
	}
	if o.IgnoreXattrs != nil {
		maps.DeleteFunc(wx, func(k string, _ []byte) bool { return o.IgnoreXattrs(k) })
		maps.DeleteFunc(gx, func(k string, _ []byte) bool { return o.IgnoreXattrs(k) })
	}
	if len(wx) != len(gx) || !maps.EqualFunc(wx, gx, bytes.Equal) {
		errorf("%s: xattrs %v, want %v", p, slices.Sorted(maps.Keys(gx)), slices.Sorted(maps.Keys(wx)))
	}
}

func ReadAll(t testing.TB, s sink.Source, p string) []byte {
	t.Helper()
	rc, err := s.Open(p)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}
