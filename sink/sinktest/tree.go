package sinktest

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TreeOptions shapes RandomTree and EdgeTree.
type TreeOptions struct {
	// Entries is the number of entries RandomTree creates; 0 means 300.
	Entries int
	// MaxFileSize bounds RandomTree's random file sizes; 0 means 256 KiB.
	MaxFileSize int64
	// Unprivileged leaves out what needs root on a host directory: char and
	// block devices, other owners (everything is owned by UID:GID) and
	// xattrs outside "user.".
	Unprivileged bool
	UID, GID     uint32 // owner of every entry when Unprivileged
	// NoXattrs leaves out extended attributes entirely.
	NoXattrs bool

	// EdgeTree only: HugeDir adds a directory of 100 000 entries and
	// HugeSparse a sparse file whose data lies past 5 GiB.
	HugeDir, HugeSparse bool
}

// treeGen writes entries into a sink and remembers directory headers, so
// their metadata is applied again after their children (creating a child
// changes a real directory's mtime).
type treeGen struct {
	s    sink.Sink
	rng  *rand.Rand
	o    TreeOptions
	dirs []*sink.Header
}

func (g *treeGen) owner(h *sink.Header, uid, gid uint32) {
	if g.o.Unprivileged {
		h.UID, h.GID = g.o.UID, g.o.GID
		return
	}
	h.UID, h.GID = uid, gid
}

func (g *treeGen) mkdir(h *sink.Header) error {
	g.fix(h)
	// Writable first, so children can be made without privilege; exact
	// metadata in finish.
	tmp := *h
	tmp.Mode |= 0o700
	if err := g.s.Mkdir(&tmp); err != nil {
		return fmt.Errorf("sinktest: mkdir %q: %w", h.Path, err)
	}
	g.dirs = append(g.dirs, h)
	return nil
}

// fix keeps an unprivileged tree readable by its owner, so it can be
// compared: files u+r, directories u+rx.
func (g *treeGen) fix(h *sink.Header) {
	if !g.o.Unprivileged {
		return
	}
	switch h.Type() {
	case sink.TypeReg:
		h.Mode |= 0o400
	case sink.TypeDir:
		h.Mode |= 0o500
	}
}

func (g *treeGen) writeFile(h *sink.Header, r io.Reader) error {
	g.fix(h)
	return g.s.WriteFile(h, r)
}

// finish re-applies directory metadata, deepest first.
func (g *treeGen) finish() error {
	for i := len(g.dirs) - 1; i >= 0; i-- {
		if err := g.s.Mkdir(g.dirs[i]); err != nil {
			return fmt.Errorf("sinktest: mkdir %q (metadata): %w", g.dirs[i].Path, err)
		}
	}
	return nil
}

func (g *treeGen) xattrsOK(prefix string) bool {
	if g.o.NoXattrs {
		return false
	}
	return !g.o.Unprivileged || prefix == "user."
}

// RandomTree populates s with a random tree that rng makes reproducible:
// files of block-boundary sizes (0, 4095, 4096, 4097, …) and sparse files
// with all-zero blocks, nested directories, fast and slow symlinks, devices,
// fifos, sockets, hard links across directories, user./trusted./security.
// xattrs including large ones, setuid/setgid/sticky modes, owners above
// 65535, nanosecond times and awkward names (255 bytes, UTF-8, spaces,
// newlines). Directory metadata is applied after the children, so a sink
// that keeps directory mtimes exactly reproduces the intended tree.
func RandomTree(s sink.Sink, rng *rand.Rand, o TreeOptions) error {
	if o.Entries <= 0 {
		o.Entries = 300
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = 256 << 10
	}
	g := &treeGen{s: s, rng: rng, o: o}
	root := &sink.Header{Path: ".", Mode: sink.TypeDir | 0o755}
	g.times(root)
	g.owner(root, 0, 0)
	if err := g.mkdir(root); err != nil {
		return err
	}
	dirs := []string{"."}
	var linkable []string
	used := map[string]bool{}
	for i := 0; i < o.Entries; i++ {
		dir := dirs[rng.IntN(len(dirs))]
		var p string
		for {
			p = join(dir, g.name())
			if !used[p] {
				break
			}
		}
		used[p] = true
		h := &sink.Header{Path: p}
		g.times(h)
		g.owner(h, g.id(), g.id())
		var err error
		switch k := rng.IntN(100); {
		case k < 20 && strings.Count(p, "/") < 8:
			h.Mode = sink.TypeDir | g.perm(true)
			g.xattrs(h)
			err = g.mkdir(h)
			dirs = append(dirs, p)
		case k < 60:
			h.Mode = sink.TypeReg | g.perm(false)
			g.xattrs(h)
			data := g.content()
			h.Size = int64(len(data))
			err = g.writeFile(h, bytes.NewReader(data))
			linkable = append(linkable, p)
		case k < 72:
			h.Mode = sink.TypeSymlink | 0o777
			h.Linkname = g.target()
			if g.xattrsOK("trusted.") && rng.IntN(4) == 0 {
				h.Xattrs = map[string][]byte{"trusted.gvx.link": []byte(p)}
			}
			err = s.Symlink(h)
		case k < 82 && len(linkable) > 0:
			err = s.Link(linkable[rng.IntN(len(linkable))], p)
			used[p] = true
		case k < 88 && !o.Unprivileged:
			h.Mode = []uint32{sink.TypeChar, sink.TypeBlock}[rng.IntN(2)] | g.perm(false)&0o777
			h.Devmajor, h.Devminor = uint32(rng.IntN(4096)), uint32(rng.IntN(1<<20))
			err = s.Mknod(h)
		case k < 94:
			h.Mode = sink.TypeFifo | g.perm(false)&0o777
			err = s.Mknod(h)
			linkable = append(linkable, p)
		default:
			h.Mode = sink.TypeSocket | g.perm(false)&0o777
			err = s.Mknod(h)
		}
		if err != nil {
			return fmt.Errorf("sinktest: random entry %q: %w", p, err)
		}
	}
	return g.finish()
}

var nameRunes = []rune("abcdefghijklmnopqrstuvwxyz0123456789-_. ÆØÅæøåé日本語ü\n")

func (g *treeGen) name() string {
	switch g.rng.IntN(40) {
	case 0:
		return strings.Repeat("n", 255)
	case 1:
		return strings.Repeat("é", 127) + "x" // 255 bytes of UTF-8
	case 2:
		return "with space"
	case 3:
		return "new\nline"
	}
	var b strings.Builder
	n := 1 + g.rng.IntN(12)
	for i := 0; i < n; i++ {
		b.WriteRune(nameRunes[g.rng.IntN(len(nameRunes))])
	}
	s := b.String()
	if s == "." || s == ".." || strings.HasPrefix(s, ".wh.") {
		s = "x" + s
	}
	return s
}

func (g *treeGen) id() uint32 {
	switch g.rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return 65536 + uint32(g.rng.IntN(1<<20))
	}
	return uint32(g.rng.IntN(65536))
}

func (g *treeGen) perm(dir bool) uint32 {
	switch g.rng.IntN(8) {
	case 0:
		if dir {
			return sink.ModeSticky | 0o777
		}
		return sink.ModeSetuid | 0o755
	case 1:
		return sink.ModeSetgid | 0o750
	case 2:
		return uint32(g.rng.IntN(0o10000))
	}
	if dir {
		return 0o755
	}
	return 0o644
}

func (g *treeGen) times(h *sink.Header) {
	t := func() time.Time {
		return time.Unix(int64(g.rng.IntN(1<<32)), int64(g.rng.IntN(1e9)))
	}
	h.Atime, h.Mtime, h.Ctime = t(), t(), t()
}

func (g *treeGen) xattrs(h *sink.Header) {
	if g.o.NoXattrs || g.rng.IntN(3) != 0 {
		return
	}
	h.Xattrs = map[string][]byte{}
	for _, pre := range []string{"user.", "trusted.", "security."} {
		if !g.xattrsOK(pre) || g.rng.IntN(2) == 0 {
			continue
		}
		n := 1 + g.rng.IntN(3)
		for i := 0; i < n; i++ {
			v := make([]byte, g.rng.IntN(40))
			for j := range v {
				v[j] = byte(g.rng.IntN(256))
			}
			h.Xattrs[fmt.Sprintf("%sgvx%d", pre, i)] = v
		}
	}
	if g.xattrsOK("user.") && g.rng.IntN(6) == 0 {
		// Large, but with the small ones still within one 4 KiB ext4 block.
		h.Xattrs["user.large"] = bytes.Repeat([]byte{byte(g.rng.IntN(256))}, 2000+g.rng.IntN(1000))
	}
}

var blockSizes = []int64{0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 65536}

func (g *treeGen) content() []byte {
	var n int64
	sparse := false
	switch k := g.rng.IntN(10); {
	case k < 4:
		n = blockSizes[g.rng.IntN(len(blockSizes))]
	case k < 6:
		n = int64(g.rng.IntN(int(g.o.MaxFileSize) + 1))
	default:
		n = int64(g.rng.IntN(int(g.o.MaxFileSize)/BlockSize+1)) * BlockSize
		sparse = true
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	if sparse {
		// Zero whole blocks, runs of them, and sometimes the last.
		for off := int64(0); off < n; off += BlockSize {
			if g.rng.IntN(2) == 0 {
				clear(b[off:min(off+BlockSize, n)])
			}
		}
	}
	return b
}

func (g *treeGen) target() string {
	switch g.rng.IntN(6) {
	case 0:
		return "/etc/passwd"
	case 1:
		return "../../.."
	case 2:
		return strings.Repeat("long/", 60+g.rng.IntN(100)) + "end" // slow symlink
	case 3:
		return "dangling"
	}
	return g.name()
}

// EdgeTree populates s with named edge cases, each under a top-level
// directory named for it: names (255 bytes, UTF-8, space, newline, leading
// dash), deep (60 nested directories), sizes (block boundaries), sparse
// (holes at start, middle and end; all-hole), modes (setuid, setgid,
// sticky, 0, 07777), owners (> 65535), times (pre-1970, post-2038, 0 and
// 999999999 ns), links (hard links across directories, fast, slow, dangling
// and absolute symlinks), dev (devices incl. 0:0 and the largest numbers,
// fifo, socket) and xattrs (large, many, empty and binary values). The
// HugeDir and HugeSparse options add huge/ (100 000 entries) and a sparse
// file with data past 5 GiB.
func EdgeTree(s sink.Sink, o TreeOptions) error {
	g := &treeGen{s: s, rng: rand.New(rand.NewPCG(1, 2)), o: o}
	e := &edge{g: g}
	t0 := time.Unix(1700000000, 123456789)
	dir := func(p string, mode uint32) {
		h := &sink.Header{Path: p, Mode: sink.TypeDir | mode, Mtime: t0, Atime: t0}
		g.owner(h, 0, 0)
		e.do(g.mkdir(h))
	}
	file := func(p string, mode uint32, uid, gid uint32, data []byte, mod func(*sink.Header)) {
		h := &sink.Header{Path: p, Mode: sink.TypeReg | mode, Size: int64(len(data)), Mtime: t0, Atime: t0}
		g.owner(h, uid, gid)
		if mod != nil {
			mod(h)
		}
		e.do(g.writeFile(h, bytes.NewReader(data)))
	}
	node := func(p string, typ, maj, min uint32) {
		h := &sink.Header{Path: p, Mode: typ | 0o644, Devmajor: maj, Devminor: min, Mtime: t0, Atime: t0}
		g.owner(h, 0, 0)
		e.do(s.Mknod(h))
	}
	symlink := func(p, target string) {
		h := &sink.Header{Path: p, Mode: sink.TypeSymlink | 0o777, Linkname: target, Mtime: t0, Atime: t0}
		g.owner(h, 0, 0)
		e.do(s.Symlink(h))
	}
	root := &sink.Header{Path: ".", Mode: sink.TypeDir | 0o755, Mtime: t0, Atime: t0}
	g.owner(root, 0, 0)
	e.do(g.mkdir(root))

	dir("names", 0o755)
	for _, n := range []string{
		strings.Repeat("a", 255), strings.Repeat("é", 127) + "x", "日本語のファイル名",
		"with space", " leading space", "trailing space ", "new\nline", "tab\there",
		"-dash", ".hidden", "...", "back\\slash", "quote\"'", "star*?[x]", "ÆØÅ",
	} {
		file("names/"+n, 0o644, 0, 0, []byte(n), nil)
	}

	p := "deep"
	dir(p, 0o755)
	for i := 0; i < 60; i++ {
		p += fmt.Sprintf("/d%02d", i)
		dir(p, 0o755)
	}
	file(p+"/bottom", 0o644, 0, 0, []byte("bottom\n"), nil)

	dir("sizes", 0o755)
	for _, n := range []int{0, 1, 511, 512, 4095, 4096, 4097, 8192, 65535, 65536, 1<<20 + 1} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		file(fmt.Sprintf("sizes/%d", n), 0o644, 0, 0, b, nil)
	}

	dir("sparse", 0o755)
	blk := func(layout string) []byte {
		b := make([]byte, 0, len(layout)*BlockSize)
		for i, c := range layout {
			if c == 'D' {
				b = append(b, bytes.Repeat([]byte{byte(i + 1)}, BlockSize)...)
			} else {
				b = append(b, make([]byte, BlockSize)...)
			}
		}
		return b
	}
	file("sparse/hole-start", 0o644, 0, 0, blk("____D"), nil)
	file("sparse/hole-middle", 0o644, 0, 0, blk("DD___D"), nil)
	file("sparse/hole-end", 0o644, 0, 0, blk("D____"), nil)
	file("sparse/all-hole", 0o644, 0, 0, blk(strings.Repeat("_", 256)), nil)
	file("sparse/partial-tail", 0o644, 0, 0, append(blk("D__"), 1, 2, 3), nil)

	dir("modes", 0o755)
	for _, m := range []uint32{0, 0o4755, 0o2755, 0o6755, 0o1755, 0o7777, 0o400} {
		file(fmt.Sprintf("modes/file-%04o", m), m, 0, 0, nil, nil)
	}
	dir("modes/sticky", 0o1777)
	dir("modes/setgid", 0o2775)
	dir("modes/noperm", 0)

	dir("owners", 0o755)
	for _, id := range [][2]uint32{{0, 0}, {1000, 1000}, {65534, 65534}, {65535, 65535}, {65536, 65537}, {100000, 200000}, {1 << 31, 4294967294}} {
		file(fmt.Sprintf("owners/%d-%d", id[0], id[1]), 0o644, id[0], id[1], nil, nil)
	}

	dir("times", 0o755)
	for name, t := range map[string]time.Time{
		"epoch":     time.Unix(0, 0),
		"pre-1970":  time.Unix(-1000000000, 1),
		"post-2038": time.Unix(1<<31+5, 999999999),
		"y2100":     time.Unix(4102444800, 500000000),
		"ns-max":    time.Unix(1600000000, 999999999),
	} {
		file("times/"+name, 0o644, 0, 0, nil, func(h *sink.Header) { h.Mtime, h.Atime = t, t.Add(time.Second) })
	}

	dir("links", 0o755)
	dir("links/a", 0o755)
	dir("links/b", 0o755)
	file("links/a/target", 0o644, 0, 0, []byte("linked\n"), nil)
	e.do(s.Link("links/a/target", "links/b/second"))
	e.do(s.Link("links/a/target", "links/third"))
	symlink("links/fast", "a/target")
	symlink("links/slow", strings.Repeat("x/", 500)+"y")
	symlink("links/max", strings.Repeat("z", 4095))
	symlink("links/dangling", "no/such/file")
	symlink("links/absolute", "/etc/passwd")
	symlink("links/up", "../../../../..")
	symlink("links/self", "self")

	dir("dev", 0o755)
	node("dev/fifo", sink.TypeFifo, 0, 0)
	node("dev/socket", sink.TypeSocket, 0, 0)
	if !o.Unprivileged {
		node("dev/null", sink.TypeChar, 1, 3)
		node("dev/whiteout", sink.TypeChar, 0, 0)
		node("dev/loop0", sink.TypeBlock, 7, 0)
		node("dev/big", sink.TypeChar, 4095, 1<<20-1)
	}

	if !o.NoXattrs {
		dir("xattrs", 0o755)
		x := map[string]map[string][]byte{
			"large":  {"user.large": bytes.Repeat([]byte("L"), 3500)},
			"empty":  {"user.empty": {}},
			"binary": {"user.bin": {0, 1, 2, 0xff, 0}},
		}
		many := map[string][]byte{}
		for i := 0; i < 40; i++ {
			many[fmt.Sprintf("user.attr%02d", i)] = []byte(fmt.Sprint(i))
		}
		x["many"] = many
		if !o.Unprivileged {
			x["namespaces"] = map[string][]byte{
				"user.a": []byte("u"), "trusted.b": []byte("t"), "security.c": []byte("s"),
			}
			x["opaque"] = map[string][]byte{"trusted.overlay.opaque": []byte("y")}
		}
		for _, n := range slices.Sorted(maps.Keys(x)) {
			xs := x[n]
			file("xattrs/"+n, 0o644, 0, 0, []byte(n), func(h *sink.Header) { h.Xattrs = xs })
		}
		h := &sink.Header{Path: "xattrs/dir", Mode: sink.TypeDir | 0o755, Mtime: t0, Xattrs: map[string][]byte{"user.d": []byte("dir")}}
		g.owner(h, 0, 0)
		e.do(g.mkdir(h))
	}

	if o.HugeDir {
		dir("huge", 0o755)
		for i := 0; i < 100000 && e.err == nil; i++ {
			file(fmt.Sprintf("huge/f%06d", i), 0o644, 0, 0, nil, nil)
		}
	}
	if o.HugeSparse {
		const size = 5<<30 + 3*BlockSize + 17
		h := &sink.Header{Path: "sparse/past-5GiB", Mode: sink.TypeReg | 0o644, Size: size, Mtime: t0}
		g.owner(h, 0, 0)
		e.do(g.writeFile(h, &tailReader{size: size, dataFrom: 5<<30 + BlockSize}))
	}
	if e.err != nil {
		return e.err
	}
	return g.finish()
}

type edge struct {
	g   *treeGen
	err error
}

func (e *edge) do(err error) {
	if e.err == nil && err != nil {
		e.err = fmt.Errorf("sinktest: edge tree: %w", err)
	}
}

// tailReader yields size bytes: zeros before dataFrom, then a pattern.
type tailReader struct {
	size, dataFrom, off int64
}

func (r *tailReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-r.off))
	if r.off+int64(n) <= r.dataFrom {
		clear(p[:n])
		r.off += int64(n)
		return n, nil
	}
	for i := 0; i < n; i++ {
		o := r.off + int64(i)
		if o < r.dataFrom {
			p[i] = 0
		} else {
			p[i] = byte(o%251 + 1)
		}
	}
	r.off += int64(n)
	return n, nil
}
