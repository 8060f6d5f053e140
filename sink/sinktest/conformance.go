package sinktest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// ConformanceCompare is what Conformance tolerates when it compares a sink's
// tree with MemFS: times no API sets (ctime, crtime) and directory sizes.
var ConformanceCompare = CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true}

// Conformance runs the shared test suite of the sink contract against the
// implementation newSink makes; each subtest calls it for a fresh, empty
// tree (a Sink and the Source reading the same tree). It checks exact
// metadata, replace semantics, refusal of symlinks in paths, RemoveAll,
// Lstat, sorted ReadDir and hard links, then writes RandomTree and EdgeTree
// and compares them with the same trees in MemFS.
//
// Privileged features (other owners, devices, trusted.* xattrs) are probed
// first; a sink that refuses them with an error wrapping fs.ErrPermission
// or sink.ErrUnsupported (a host directory without root) is tested without
// them, and the test log says so.
func Conformance(t *testing.T, newSink func() (sink.Sink, sink.Source)) {
	t.Helper()
	c := &conf{newSink: newSink}
	c.probe(t)
	t.Run("Types", c.types)
	t.Run("Replace", c.replace)
	t.Run("SymlinkInPath", c.symlinkInPath)
	t.Run("MissingParent", c.missingParent)
	t.Run("RemoveAll", c.removeAll)
	t.Run("ReadDirSorted", c.readDir)
	t.Run("HardLinks", c.hardLinks)
	t.Run("Sparse", c.sparse)
	t.Run("RandomTree", c.randomTree)
	t.Run("EdgeTree", c.edgeTree)
}

type conf struct {
	newSink      func() (sink.Sink, sink.Source)
	unprivileged bool
	noUserXattrs bool   // the target stores no user.* xattrs (tmpfs before Linux 6.6)
	uid, gid     uint32 // owner to use when unprivileged
}

// x returns m, or nil where the target stores no user.* xattrs.
func (c *conf) x(m map[string][]byte) map[string][]byte {
	if c.noUserXattrs {
		return nil
	}
	return m
}

func denied(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, sink.ErrUnsupported)
}

func (c *conf) probe(t *testing.T) {
	s, src := c.newSink()
	root, err := src.Lstat(".")
	if err != nil {
		t.Fatalf("Lstat(.): %v", err)
	}
	c.uid, c.gid = root.UID, root.GID
	err1 := s.WriteFile(&sink.Header{Path: "probe", Mode: sink.TypeReg | 0o644, UID: 100000, GID: 100001,
		Xattrs: map[string][]byte{"trusted.gvx": []byte("1")}}, bytes.NewReader(nil))
	err2 := s.Mknod(&sink.Header{Path: "probe-dev", Mode: sink.TypeChar | 0o600, Devmajor: 1, Devminor: 3})
	h := &sink.Header{Path: "probe-user", Mode: sink.TypeReg | 0o644, UID: c.uid, GID: c.gid,
		Xattrs: map[string][]byte{"user.gvx": []byte("1")}}
	if err := s.WriteFile(h, bytes.NewReader(nil)); errors.Is(err, sink.ErrUnsupported) {
		c.noUserXattrs = true
		t.Logf("target stores no user.* xattrs (%v): testing without xattrs", err)
	} else if err != nil {
		t.Fatalf("probing user.* xattrs: %v", err)
	}
	for _, err := range []error{err1, err2} {
		if err != nil && !denied(err) {
			t.Fatalf("probing privileged features: %v", err)
		}
		if err != nil {
			c.unprivileged = true
			t.Logf("sink refuses privileged features (%v): testing without other owners, devices and trusted.* xattrs", err)
		}
	}
}

// hdr fills in an owner that the sink can store.
func (c *conf) hdr(p string, mode uint32) *sink.Header {
	h := &sink.Header{Path: p, Mode: mode, Mtime: time.Unix(1234567890, 123456789), Atime: time.Unix(1234567891, 987654321)}
	if c.unprivileged {
		h.UID, h.GID = c.uid, c.gid
	} else {
		h.UID, h.GID = 70000, 80000
	}
	return h
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkHeader compares the metadata the contract says is applied exactly.
func checkHeader(t *testing.T, got, want *sink.Header) {
	t.Helper()
	if got.Mode != want.Mode {
		t.Errorf("%s: mode %06o, want %06o", want.Path, got.Mode, want.Mode)
	}
	if got.UID != want.UID || got.GID != want.GID {
		t.Errorf("%s: owner %d:%d, want %d:%d", want.Path, got.UID, got.GID, want.UID, want.GID)
	}
	if !got.Mtime.Equal(normTime(want.Mtime)) {
		t.Errorf("%s: mtime %s, want %s", want.Path, fmtTime(got.Mtime), fmtTime(want.Mtime))
	}
	if !got.Atime.Equal(normTime(want.Atime)) {
		t.Errorf("%s: atime %s, want %s", want.Path, fmtTime(got.Atime), fmtTime(want.Atime))
	}
	if len(got.Xattrs) != len(want.Xattrs) {
		t.Errorf("%s: xattrs %q, want %q", want.Path, got.Xattrs, want.Xattrs)
	}
	for k, v := range want.Xattrs {
		if g, ok := got.Xattrs[k]; !ok || !bytes.Equal(g, v) {
			t.Errorf("%s: xattr %s = %q, want %q", want.Path, k, g, v)
		}
	}
	switch want.Type() {
	case sink.TypeReg:
		if got.Size != want.Size {
			t.Errorf("%s: size %d, want %d", want.Path, got.Size, want.Size)
		}
	case sink.TypeSymlink:
		if got.Linkname != want.Linkname {
			t.Errorf("%s: target %q, want %q", want.Path, got.Linkname, want.Linkname)
		}
	case sink.TypeChar, sink.TypeBlock:
		if got.Devmajor != want.Devmajor || got.Devminor != want.Devminor {
			t.Errorf("%s: device %d:%d, want %d:%d", want.Path, got.Devmajor, got.Devminor, want.Devmajor, want.Devminor)
		}
	}
}

func readAll(t *testing.T, src sink.Source, p string) []byte {
	t.Helper()
	r, err := src.Open(p)
	must(t, "Open "+p, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	must(t, "read "+p, err)
	return b
}

func (c *conf) types(t *testing.T) {
	s, src := c.newSink()
	dir := c.hdr("d", sink.TypeDir|sink.ModeSticky|0o755)
	dir.Xattrs = c.x(map[string][]byte{"user.dir": []byte("x")})
	must(t, "Mkdir", s.Mkdir(dir))
	file := c.hdr("d/f", sink.TypeReg|sink.ModeSetuid|sink.ModeSetgid|0o751)
	data := append(append(bytes.Repeat([]byte{7}, 4097), make([]byte, 3*BlockSize)...), 9)
	file.Size = int64(len(data))
	file.Xattrs = c.x(map[string][]byte{"user.a": []byte("1"), "user.empty": {}, "user.big": bytes.Repeat([]byte("b"), 2500)})
	if !c.unprivileged && !c.noUserXattrs {
		file.Xattrs["trusted.overlay.opaque"] = []byte("y")
		file.Xattrs["security.gvx"] = []byte{0, 1, 2}
	}
	must(t, "WriteFile", s.WriteFile(file, bytes.NewReader(data)))
	link := c.hdr("d/l", sink.TypeSymlink|0o777)
	link.Linkname = "../outside/of/it"
	must(t, "Symlink", s.Symlink(link))
	fifo := c.hdr("fifo", sink.TypeFifo|0o640)
	must(t, "Mknod fifo", s.Mknod(fifo))
	sock := c.hdr("sock", sink.TypeSocket|0o600)
	must(t, "Mknod socket", s.Mknod(sock))
	want := []*sink.Header{file, link, fifo, sock}
	if !c.unprivileged {
		chr := c.hdr("chr", sink.TypeChar|0o620)
		chr.Devmajor, chr.Devminor = 4095, 1<<20-1
		blk := c.hdr("blk", sink.TypeBlock|0o660)
		blk.Devmajor, blk.Devminor = 7, 300
		wh := c.hdr("whiteout", sink.TypeChar)
		for _, h := range []*sink.Header{chr, blk, wh} {
			must(t, "Mknod "+h.Path, s.Mknod(h))
		}
		want = append(want, chr, blk, wh)
	}
	// Directory metadata goes last, as walkers apply it.
	must(t, "Mkdir again", s.Mkdir(dir))
	root := c.hdr(".", sink.TypeDir|0o700)
	must(t, "Mkdir(.)", s.Mkdir(root))
	want = append(want, dir, root)
	for _, w := range want {
		got, err := src.Lstat(w.Path)
		must(t, "Lstat", err)
		checkHeader(t, got, w)
	}
	if got := readAll(t, src, "d/f"); !bytes.Equal(got, data) {
		t.Errorf("d/f: content differs (%d bytes, want %d)", len(got), len(data))
	}
	if _, err := src.Lstat("nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat(nothing) = %v, want fs.ErrNotExist", err)
	}
	for _, bad := range []string{"", "/abs", "a/../b", "./a", "a/", "a//b", ".."} {
		if _, err := src.Lstat(bad); err == nil {
			t.Errorf("Lstat(%q) accepted an unclean path", bad)
		}
		if err := s.WriteFile(&sink.Header{Path: bad, Mode: sink.TypeReg | 0o644}, bytes.NewReader(nil)); err == nil {
			t.Errorf("WriteFile(%q) accepted an unclean path", bad)
		}
	}
	if err := s.WriteFile(&sink.Header{Path: "short", Mode: sink.TypeReg | 0o644, Size: 10}, bytes.NewReader([]byte("abc"))); err == nil {
		t.Errorf("WriteFile with a short reader succeeded")
	}
}

// sparse: a *sink.Sparse (what a sparse tar entry arrives as) stores the
// same bytes as its apparent contents, whichever view the sink reads:
// unaligned regions, two in one block, data in the last byte and a file
// ending in a hole; a short data stream is an error.
func (c *conf) sparse(t *testing.T) {
	s, src := c.newSink()
	const size = 16 << 20
	regs := []sink.Region{{Off: 100, Len: 5000}, {Off: 8000, Len: 10}, {Off: 8190, Len: 3}, {Off: 1 << 20, Len: 1 << 16}, {Off: size - 1, Len: 1}}
	var data []byte
	want := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 4))
	for _, rg := range regs {
		for i := range rg.Len {
			b := byte(r.IntN(255) + 1)
			data = append(data, b)
			want[rg.Off+i] = b
		}
	}
	for _, tc := range []struct {
		name string
		size int64
		regs []sink.Region
	}{{"f", size, regs}, {"tailhole", size + 3<<20, regs}, {"empty", 1 << 30, nil}} {
		sp, err := sink.NewSparse(tc.size, tc.regs, bytes.NewReader(data))
		must(t, "NewSparse", err)
		h := c.hdr(tc.name, sink.TypeReg|0o644)
		h.Size = tc.size
		must(t, "WriteFile "+tc.name, s.WriteFile(h, sp))
		got, err := src.Lstat(tc.name)
		must(t, "Lstat", err)
		if got.Size != tc.size {
			t.Errorf("%s: size %d, want %d", tc.name, got.Size, tc.size)
		}
	}
	if got := readAll(t, src, "f"); !bytes.Equal(got, want) {
		t.Errorf("f: content differs from the sparse file's apparent bytes")
	}
	if got := readAll(t, src, "tailhole"); !bytes.Equal(got[:size], want) || !bytes.Equal(got[size:], make([]byte, 3<<20)) {
		t.Errorf("tailhole: content differs from the sparse file's apparent bytes")
	}
	sp, err := sink.NewSparse(size, regs, bytes.NewReader(data[:len(data)-2]))
	must(t, "NewSparse", err)
	h := c.hdr("short", sink.TypeReg|0o644)
	h.Size = size
	if err := s.WriteFile(h, sp); err == nil {
		t.Errorf("WriteFile of a sparse file whose data stream is short succeeded")
	}
}

func (c *conf) replace(t *testing.T) {
	s, src := c.newSink()
	wf := func(p string, data string) {
		h := c.hdr(p, sink.TypeReg|0o644)
		h.Size = int64(len(data))
		must(t, "WriteFile "+p, s.WriteFile(h, bytes.NewReader([]byte(data))))
	}
	typ := func(p string) uint32 {
		h, err := src.Lstat(p)
		must(t, "Lstat "+p, err)
		return h.Type()
	}
	wf("f", "one")
	wf("f", "two-longer")
	if got := readAll(t, src, "f"); string(got) != "two-longer" {
		t.Errorf("file over file: %q", got)
	}
	wf("victim", "victim")
	sl := c.hdr("s", sink.TypeSymlink|0o777)
	sl.Linkname = "victim"
	must(t, "Symlink", s.Symlink(sl))
	wf("s", "replaced the link") // must not write through it
	if typ("s") != sink.TypeReg || string(readAll(t, src, "victim")) != "victim" {
		t.Errorf("file over symlink wrote through the link or kept it")
	}
	sl.Path = "f"
	must(t, "symlink over file", s.Symlink(sl))
	if typ("f") != sink.TypeSymlink {
		t.Errorf("symlink over file: type %o", typ("f"))
	}
	must(t, "fifo over symlink", s.Mknod(c.hdr("f", sink.TypeFifo|0o644)))
	if typ("f") != sink.TypeFifo {
		t.Errorf("fifo over symlink: type %o", typ("f"))
	}
	must(t, "dir over fifo", s.Mkdir(c.hdr("f", sink.TypeDir|0o755)))
	if typ("f") != sink.TypeDir {
		t.Errorf("dir over fifo: type %o", typ("f"))
	}
	// A directory stays: every create but Mkdir fails, Mkdir updates
	// metadata (xattrs replaced, not merged) and keeps the children.
	d := c.hdr("d", sink.TypeDir|0o755)
	d.Xattrs = c.x(map[string][]byte{"user.old": []byte("1"), "user.keep": []byte("a")})
	must(t, "Mkdir d", s.Mkdir(d))
	wf("d/child", "child")
	if err := s.WriteFile(c.hdr("d", sink.TypeReg|0o644), bytes.NewReader(nil)); err == nil {
		t.Errorf("WriteFile over a directory succeeded")
	}
	sl.Path = "d"
	if err := s.Symlink(sl); err == nil {
		t.Errorf("Symlink over a directory succeeded")
	}
	if err := s.Mknod(c.hdr("d", sink.TypeFifo|0o644)); err == nil {
		t.Errorf("Mknod over a directory succeeded")
	}
	if err := s.Link("victim", "d"); err == nil {
		t.Errorf("Link over a directory succeeded")
	}
	d2 := c.hdr("d", sink.TypeDir|0o1700)
	d2.Mtime = time.Unix(99, 1)
	d2.Xattrs = c.x(map[string][]byte{"user.keep": []byte("b"), "user.new": []byte("2")})
	must(t, "Mkdir over dir", s.Mkdir(d2))
	got, err := src.Lstat("d")
	must(t, "Lstat d", err)
	checkHeader(t, got, d2)
	if names, _ := src.ReadDir("d"); !slices.Equal(names, []string{"child"}) {
		t.Errorf("Mkdir over dir lost children: %q", names)
	}
	// A hard link replaces a file too.
	wf("g", "g")
	must(t, "Link over file", s.Link("victim", "g"))
	if string(readAll(t, src, "g")) != "victim" {
		t.Errorf("Link over file kept the old file")
	}
}

func (c *conf) symlinkInPath(t *testing.T) {
	s, src := c.newSink()
	must(t, "Mkdir", s.Mkdir(c.hdr("d", sink.TypeDir|0o755)))
	f := c.hdr("d/f", sink.TypeReg|0o644)
	f.Size = 4
	must(t, "WriteFile", s.WriteFile(f, bytes.NewReader([]byte("safe"))))
	must(t, "Mkdir d/sub", s.Mkdir(c.hdr("d/sub", sink.TypeDir|0o755)))
	for _, target := range []string{"d", "/", "..", "../../../../tmp", "/etc"} {
		l := c.hdr("l", sink.TypeSymlink|0o777)
		l.Linkname = target
		must(t, "Symlink", s.Symlink(l))
		wantErr := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, sink.ErrSymlinkInPath) {
				t.Errorf("link to %q: %s = %v, want ErrSymlinkInPath", target, op, err)
			}
		}
		nf := c.hdr("l/f", sink.TypeReg|0o644)
		nf.Size = 4
		wantErr("WriteFile l/f", s.WriteFile(nf, bytes.NewReader([]byte("evil"))))
		wantErr("Mkdir l/x", s.Mkdir(c.hdr("l/x", sink.TypeDir|0o755)))
		wantErr("Mkdir l/sub", s.Mkdir(c.hdr("l/sub", sink.TypeDir|0o700)))
		sl := c.hdr("l/s", sink.TypeSymlink|0o777)
		sl.Linkname = "x"
		wantErr("Symlink l/s", s.Symlink(sl))
		wantErr("Mknod l/p", s.Mknod(c.hdr("l/p", sink.TypeFifo|0o644)))
		wantErr("Link d/f l/h", s.Link("d/f", "l/h"))
		wantErr("Link l/f h", s.Link("l/f", "h"))
		wantErr("RemoveAll l/f", s.RemoveAll("l/f"))
		wantErr("RemoveAll l/sub", s.RemoveAll("l/sub"))
		_, err := src.Lstat("l/f")
		wantErr("Lstat l/f", err)
		_, err = src.ReadDir("l/sub")
		wantErr("ReadDir l/sub", err)
		_, err = src.Open("l/f")
		wantErr("Open l/f", err)
		if _, err := src.ReadDir("l"); err == nil {
			t.Errorf("ReadDir of a symlink followed it")
		}
		if _, err := src.Open("l"); err == nil {
			t.Errorf("Open of a symlink followed it")
		}
	}
	if string(readAll(t, src, "d/f")) != "safe" {
		t.Errorf("d/f was changed through a symlink")
	}
	if names, _ := src.ReadDir("d"); !slices.Equal(names, []string{"f", "sub"}) {
		t.Errorf("d changed through a symlink: %q", names)
	}
	h, err := src.Lstat("d/sub")
	must(t, "Lstat d/sub", err)
	if h.Mode != sink.TypeDir|0o755 {
		t.Errorf("d/sub mode changed through a symlink: %o", h.Mode)
	}
	// RemoveAll of the link removes the link only.
	must(t, "RemoveAll l", s.RemoveAll("l"))
	if _, err := src.Lstat("d/f"); err != nil {
		t.Errorf("RemoveAll of a symlink removed its target: %v", err)
	}
}

func (c *conf) missingParent(t *testing.T) {
	s, _ := c.newSink()
	err := s.WriteFile(c.hdr("no/such", sink.TypeReg|0o644), bytes.NewReader(nil))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFile under a missing parent = %v, want fs.ErrNotExist", err)
	}
	if err := s.Mkdir(c.hdr("no/such", sink.TypeDir|0o755)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Mkdir under a missing parent = %v, want fs.ErrNotExist", err)
	}
	f := c.hdr("file", sink.TypeReg|0o644)
	must(t, "WriteFile", s.WriteFile(f, bytes.NewReader(nil)))
	if err := s.Mkdir(c.hdr("file/sub", sink.TypeDir|0o755)); err == nil {
		t.Errorf("Mkdir under a regular file succeeded")
	}
}

func (c *conf) removeAll(t *testing.T) {
	s, src := c.newSink()
	must(t, "RemoveAll missing", s.RemoveAll("missing"))
	must(t, "RemoveAll missing/deeper", s.RemoveAll("missing/deeper"))
	p := "a"
	for i := 0; i < 5; i++ {
		h := c.hdr(p, sink.TypeDir|0o755)
		must(t, "Mkdir", s.Mkdir(h))
		for _, n := range []string{"x", "y"} {
			must(t, "WriteFile", s.WriteFile(c.hdr(p+"/"+n, sink.TypeReg|0o444), bytes.NewReader(nil)))
		}
		if i == 4 {
			h.Mode = sink.TypeDir | 0o500 // read-only dir: still removable
			must(t, "Mkdir read-only", s.Mkdir(h))
		}
		p += "/b"
	}
	must(t, "Link", s.Link("a/x", "keep"))
	must(t, "RemoveAll a/b", s.RemoveAll("a/b"))
	if names, _ := src.ReadDir("a"); !slices.Equal(names, []string{"x", "y"}) {
		t.Errorf("after RemoveAll(a/b): a has %q", names)
	}
	must(t, "RemoveAll a", s.RemoveAll("a"))
	if _, err := src.Lstat("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after RemoveAll(a): Lstat = %v", err)
	}
	h, err := src.Lstat("keep")
	must(t, "Lstat keep", err)
	if h.Nlink != 1 {
		t.Errorf("keep: nlink %d after its other name was removed, want 1", h.Nlink)
	}
	must(t, "RemoveAll file", s.RemoveAll("keep"))
	if names, _ := src.ReadDir("."); len(names) != 0 {
		t.Errorf("root not empty: %q", names)
	}
}

func (c *conf) readDir(t *testing.T) {
	s, src := c.newSink()
	names := []string{"b", "a", "B", "é", "日本", "a b", "a.b", "~", "0", "Z", "-"}
	for _, n := range names {
		must(t, "WriteFile", s.WriteFile(c.hdr(n, sink.TypeReg|0o644), bytes.NewReader(nil)))
	}
	got, err := src.ReadDir(".")
	must(t, "ReadDir", err)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("ReadDir = %q, want %q", got, names)
	}
	if _, err := src.ReadDir("a"); err == nil {
		t.Errorf("ReadDir of a regular file succeeded")
	}
}

func (c *conf) hardLinks(t *testing.T) {
	s, src := c.newSink()
	must(t, "Mkdir", s.Mkdir(c.hdr("d1", sink.TypeDir|0o755)))
	must(t, "Mkdir", s.Mkdir(c.hdr("d2", sink.TypeDir|0o755)))
	f := c.hdr("d1/f", sink.TypeReg|0o600)
	f.Size = 5
	must(t, "WriteFile", s.WriteFile(f, bytes.NewReader([]byte("hello"))))
	must(t, "Link", s.Link("d1/f", "d2/g"))
	must(t, "Link", s.Link("d1/f", "h"))
	must(t, "Link again", s.Link("d1/f", "h"))
	a, err := src.Lstat("d1/f")
	must(t, "Lstat", err)
	b, err := src.Lstat("d2/g")
	must(t, "Lstat", err)
	if a.Ino != b.Ino || a.Nlink != 3 || b.Nlink != 3 {
		t.Errorf("links: ino %d/%d nlink %d/%d, want same ino, nlink 3", a.Ino, b.Ino, a.Nlink, b.Nlink)
	}
	if string(readAll(t, src, "h")) != "hello" {
		t.Errorf("link content differs")
	}
	if err := s.Link("d1", "d3"); err == nil {
		t.Errorf("hard link to a directory succeeded")
	}
	if err := s.Link("missing", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Link(missing) = %v, want fs.ErrNotExist", err)
	}
	must(t, "WriteFile", s.WriteFile(c.hdr("h", sink.TypeReg|0o644), bytes.NewReader(nil)))
	a, _ = src.Lstat("d1/f")
	if a.Nlink != 2 {
		t.Errorf("after replacing one name: nlink %d, want 2", a.Nlink)
	}
	l := c.hdr("sl", sink.TypeSymlink|0o777)
	l.Linkname = "d1/f"
	must(t, "Symlink", s.Symlink(l))
	must(t, "Link to a symlink", s.Link("sl", "sl2"))
	if h, err := src.Lstat("sl2"); err != nil || h.Type() != sink.TypeSymlink {
		t.Errorf("a hard link to a symlink followed it: %v %v", h, err)
	}
}

func (c *conf) treeOpts() TreeOptions {
	return TreeOptions{Unprivileged: c.unprivileged, UID: c.uid, GID: c.gid, NoXattrs: c.noUserXattrs}
}

func (c *conf) randomTree(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s, src := c.newSink()
		ref := NewMemFS()
		o := c.treeOpts()
		must(t, "RandomTree", RandomTree(s, rand.New(rand.NewPCG(seed, seed)), o))
		must(t, "RandomTree (MemFS)", RandomTree(ref, rand.New(rand.NewPCG(seed, seed)), o))
		if err := Compare(ref, src, ConformanceCompare); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

func (c *conf) edgeTree(t *testing.T) {
	s, src := c.newSink()
	ref := NewMemFS()
	o := c.treeOpts()
	must(t, "EdgeTree", EdgeTree(s, o))
	must(t, "EdgeTree (MemFS)", EdgeTree(ref, o))
	if err := Compare(ref, src, ConformanceCompare); err != nil {
		t.Error(err)
	}
}
