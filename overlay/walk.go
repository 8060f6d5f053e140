package overlay

import (
	"archive/tar"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"z.gfire.dev/gvx/sink"
)

// mode selects what a walker does with OCI whiteout entries.
type mode int

const (
	modeImport    mode = iota // plain tar: ".wh.*" are ordinary names
	modeLayer                 // OCI layer applied: whiteouts delete, opaque dirs hide
	modeOverlayFS             // OCI layer in overlayfs form: char 0:0 and opaque xattrs
)

// walker applies one tar stream to a sink. Directory metadata is recorded
// and applied after all entries, deepest first, so children never disturb
// a directory's mtime and read-only directories can be filled.
type walker struct {
	dst       sink.Sink
	mode      mode
	dest      string
	lim       limits
	opaqueKey string

	dirs   map[string]*sink.Header // metadata to apply at the end
	isDir  map[string]bool         // paths known to be directories in dst
	fresh  map[string]bool         // directories this walk created: all they hold is known
	found  map[string]*sink.Header // directories knowAll found, not yet written into: their metadata
	whited map[string]bool         // whiteout devices this walk made (overlay form)
	layer  map[string]bool         // paths (and their ancestors) this archive wrote
	opaque []string
	last   string
	serial bool // run reads in the caller's goroutine only (tests)
	// stream is the pipelined walk's reader of the current entry's data,
	// reused: sinks read an entry's data only during the call that takes it.
	stream entryStream
}

func newWalker(dst sink.Sink, m mode, dest string, lim limits) (*walker, error) {
	d, err := cleanName(dest)
	if err != nil {
		return nil, fmt.Errorf("overlay: destination: %w", err)
	}
	w := &walker{dst: dst, mode: m, dest: d, lim: lim,
		dirs: map[string]*sink.Header{}, isDir: map[string]bool{}, layer: map[string]bool{}, fresh: map[string]bool{}, whited: map[string]bool{},
		found: map[string]*sink.Header{}}
	// Record the root's metadata before reading it moves its atime.
	if err := w.ensureDir("."); err != nil {
		return nil, fmt.Errorf("overlay: target root: %w", err)
	}
	if names, err := dst.ReadDir("."); err == nil && w.knowAll(".", names) {
		w.fresh["."] = true // an empty target (or a new volume's lost+found): nothing unknown in it
	}
	if d != "." {
		if err := w.ensureDir(d); err != nil {
			return nil, fmt.Errorf("overlay: destination %q: %w", dest, err)
		}
	}
	return w, nil
}

// run reads a possibly compressed tar stream to its end: pipelined
// (pipeline.go) when more than one core may run Go code, else serially.
// Both apply the same entries in the same order and make the same calls
// on the sink.
func (w *walker) run(r io.Reader) error {
	if runtime.GOMAXPROCS(0) > 1 && !w.serial {
		return w.runPipelined(r)
	}
	return w.runSerial(r)
}

// runSerial reads and applies each entry in turn in the caller's goroutine.
func (w *walker) runSerial(r io.Reader) error {
	rc, err := Decompress(r)
	if err != nil {
		return &EntryError{After: true, Err: err}
	}
	defer rc.Close()
	tap := &tarTap{r: rc}
	tr := tar.NewReader(tap)
	for {
		hdr, err := tap.next(tr)
		if err == io.EOF {
			break
		}
		if err != nil {
			return &EntryError{Name: w.last, After: true, Err: corrupt(err)}
		}
		w.last = hdr.Name
		if err := w.entryData(tap, tr, hdr); err != nil {
			return &EntryError{Name: hdr.Name, Err: corrupt(err)}
		}
	}
	return w.finishWalk()
}

// runPipelined reads and parses the archive in a reader goroutine while
// this one applies the entries (pipeline.go).
func (w *walker) runPipelined(r io.Reader) error {
	rc, err := Decompress(r)
	if err != nil {
		return &EntryError{After: true, Err: err}
	}
	defer rc.Close()
	q, stop := startReadAhead(&tarTap{r: rc}, w.prepare)
	defer stop()
	for {
		p, ok := q.pop()
		if !ok {
			break
		}
		if p.hdr == nil {
			return &EntryError{Name: w.last, After: true, Err: corrupt(p.err)}
		}
		w.last = p.hdr.Name
		if p.hdrErr != nil {
			return &EntryError{Name: p.hdr.Name, Err: corrupt(p.hdrErr)}
		}
		if err := w.entryStream(p, q); err != nil {
			return &EntryError{Name: p.hdr.Name, Err: corrupt(err)}
		}
	}
	return w.finishWalk()
}

// entryStream applies the entry whose header piece is p, its data read from
// the pieces that follow on q, and consumes what the sink left unread.
func (w *walker) entryStream(p piece, q *pieceQueue) error {
	s := &w.stream
	*s = entryStream{q: q}
	var data io.Reader = s
	if p.sparse {
		sp, err := sink.NewSparse(p.hdr.Size, p.regs, s)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		data = sp
	}
	if err := w.entry(p.hdr, p.prep, data); err != nil {
		return err // the walk stops: stop discards the rest
	}
	return s.drain()
}

func (w *walker) finishWalk() error {
	if err := w.finish(); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	return nil
}

// corrupt marks archive-level read failures as ErrCorrupt.
func corrupt(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, tar.ErrHeader) ||
		errors.Is(err, tar.ErrFieldTooLong) || errors.Is(err, tar.ErrInsecurePath) {
		if !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	return err
}

// entryData applies entry hdr, its data read from tr or, for a sparse
// entry, region by region from the archive (tar_sparse.go), and reads what
// the sink left unread so the tap can record the next header.
func (w *walker) entryData(tap *tarTap, tr *tar.Reader, hdr *tar.Header) error {
	if !isSparse(hdr) {
		if err := w.entry(hdr, w.prepare(hdr), tr); err != nil {
			return err
		}
		_, err := io.Copy(io.Discard, tr)
		return err
	}
	sp, done, err := tap.sparseEntry(hdr)
	if err != nil {
		return err
	}
	if err := w.entry(hdr, w.prepare(hdr), sp); err != nil {
		return err
	}
	return done()
}

// entryPrep is what an entry's header says before the sink is consulted:
// its path under the walk's destination, checked against the limits, and
// its sink header. prepare makes it from the header alone (the walker's
// destination, limits and mode never change during a walk), so the
// pipelined walk makes it in the reader goroutine, off the sink's.
type entryPrep struct {
	skip     bool // global PAX records, a GNU volume label: nothing to apply
	path     string
	whiteout bool         // a ".wh." name in a layer mode: h is nil
	h        *sink.Header // the entry's sink header
	err      error        // the first check that refused the entry
}

// prepare converts and checks hdr in the order entry applies the checks.
func (w *walker) prepare(hdr *tar.Header) entryPrep {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader, 'V': // global PAX records; GNU volume label
		return entryPrep{skip: true}
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return entryPrep{err: err}
	}
	p := joinPath(w.dest, name)
	if err := w.lim.checkPath(p); err != nil {
		return entryPrep{err: err}
	}
	if w.mode != modeImport && name != "." && strings.HasPrefix(baseOf(p), ".wh.") {
		return entryPrep{path: p, whiteout: true}
	}
	h, err := header(hdr, p)
	if err == nil {
		err = w.lim.checkXattrs(h.Xattrs)
	}
	return entryPrep{path: p, h: h, err: err}
}

// entry applies the entry hdr, prepared as ep, its data read from tr.
func (w *walker) entry(hdr *tar.Header, ep entryPrep, tr io.Reader) error {
	if ep.skip {
		return nil
	}
	if ep.err != nil {
		return ep.err
	}
	p, h := ep.path, ep.h
	if ep.whiteout {
		return w.whiteout(parentOf(p), baseOf(p), hdr)
	}
	if p != w.dest {
		if err := w.ensureDir(parentOf(p)); err != nil {
			return err
		}
	}
	w.mark(p)
	if h.Type() == sink.TypeDir {
		// Mkdir replaces a non-directory itself. Writable now, exact at
		// the end.
		tmp := *h
		tmp.Mode |= 0o700
		if err := w.dst.Mkdir(&tmp); err != nil {
			return err
		}
		if !w.isDir[p] && w.fresh[parentOf(p)] {
			w.fresh[p] = true // new, or replaced a walk-made file
		}
		if w.whited[p] {
			// It replaced this layer's whiteout of a lower p: hide that.
			delete(w.whited, p)
			w.opaque = append(w.opaque, p)
		}
		w.isDir[p] = true
		w.dirs[p] = h
		return nil
	}
	if p == "." || p == w.dest {
		return fmt.Errorf("%w: the root must be a directory", ErrCorrupt)
	}
	if hdr.Typeflag != tar.TypeLink && h.Type() == sink.TypeReg && w.lim.maxFileSize > 0 && h.Size > w.lim.maxFileSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, h.Size, w.lim.maxFileSize)
	}
	// A directory in the way is replaced. Under a directory this walk
	// created, only walk-made directories can be in the way and isDir
	// knows them, so the lookup (not free on a real filesystem) is skipped.
	inWay := w.isDir[p]
	if !inWay && !w.fresh[parentOf(p)] {
		t, err := w.typeAt(p)
		if err != nil {
			return err
		}
		inWay = t == sink.TypeDir
	}
	if inWay {
		if err := w.remove(p); err != nil {
			return err
		}
	}
	return w.create(hdr, h, p, tr)
}

func (w *walker) create(hdr *tar.Header, h *sink.Header, p string, r io.Reader) error {
	switch h.Type() {
	case sink.TypeReg:
		if hdr.Typeflag == tar.TypeLink {
			return w.link(hdr, p)
		}
		return w.dst.WriteFile(h, r)
	case sink.TypeSymlink:
		return w.dst.Symlink(h)
	default:
		return w.dst.Mknod(h)
	}
}

func (w *walker) link(hdr *tar.Header, p string) error {
	tn, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	target := joinPath(w.dest, tn)
	t, err := w.typeAt(target)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	switch t {
	case 0:
		return fmt.Errorf("%w: hard link to %q, which is not an earlier entry", ErrCorrupt, hdr.Linkname)
	case sink.TypeDir:
		return fmt.Errorf("%w: hard link to directory %q", ErrCorrupt, hdr.Linkname)
	}
	return w.dst.Link(target, p)
}

// whiteout handles ".wh.NAME" and ".wh..wh..opq" in the layer modes.
func (w *walker) whiteout(dir, base string, hdr *tar.Header) error {
	if base == ".wh..wh..opq" {
		if err := w.ensureDir(dir); err != nil {
			return err
		}
		w.mark(dir)
		w.opaque = append(w.opaque, dir)
		return nil
	}
	name := strings.TrimPrefix(base, ".wh.")
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".wh.") {
		return fmt.Errorf("%w: bad whiteout name %q", ErrCorrupt, base)
	}
	target := joinPath(dir, name)
	if w.layer[target] {
		// The layer has entries at or under target too: they stay, and
		// the lower target goes, as if the whiteout had come first. For a
		// directory that is exactly an opaque directory.
		if w.isDir[target] {
			w.opaque = append(w.opaque, target)
		}
		return nil
	}
	if w.mode == modeLayer {
		return w.remove(target)
	}
	if err := w.ensureDir(dir); err != nil {
		return err
	}
	if t, err := w.typeAt(target); err != nil {
		return err
	} else if t == sink.TypeDir {
		if err := w.remove(target); err != nil {
			return err
		}
	}
	if hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) > math.MaxUint32 || int64(hdr.Gid) > math.MaxUint32 {
		return fmt.Errorf("%w: uid/gid %d/%d out of range", ErrCorrupt, hdr.Uid, hdr.Gid)
	}
	if err := w.dst.Mknod(&sink.Header{Path: target, Mode: sink.TypeChar, UID: uint32(hdr.Uid), GID: uint32(hdr.Gid),
		Mtime: hdr.ModTime, Atime: hdr.ModTime}); err != nil {
		return err
	}
	w.whited[target] = true
	return nil
}

// mark records p and its ancestors as written by this archive, for the
// whiteouts and opaque directories of the layer modes (a plain import has
// neither: nothing to record).
func (w *walker) mark(p string) {
	if w.mode == modeImport {
		return
	}
	for !w.layer[p] {
		w.layer[p] = true
		if p == "." {
			return
		}
		p = parentOf(p)
	}
}

// typeAt returns the type of the entry at p, 0 if there is none, and an
// error wrapping sink.ErrSymlinkInPath if p lies under a symlink.
func (w *walker) typeAt(p string) (uint32, error) {
	if w.isDir[p] {
		return sink.TypeDir, nil
	}
	h, err := w.dst.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return h.Type(), nil
}

// ensureDir makes sure directory p exists, creating missing ones with mode
// 0755, owner 0:0 and epoch times (archives may omit parents). An ancestor
// that is a symlink or another non-directory is an error: nothing is ever
// written through a symlink.
func (w *walker) ensureDir(p string) error {
	if w.isDir[p] {
		if h, ok := w.found[p]; ok {
			// Written into for the first time: children will change its
			// mtime, keep what it had.
			delete(w.found, p)
			if _, ok := w.dirs[p]; !ok {
				w.dirs[p] = h
			}
		}
		return nil
	}
	if p != "." {
		if err := w.ensureDir(parentOf(p)); err != nil {
			return err
		}
	}
	h, err := w.dst.Lstat(p)
	t := uint32(0)
	switch {
	case err == nil:
		t = h.Type()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	switch t {
	case sink.TypeDir:
		// Children will change a real directory's mtime: keep what it had.
		if _, ok := w.dirs[p]; !ok {
			w.dirs[p] = h
		}
	case 0:
		h := &sink.Header{Path: p, Mode: sink.TypeDir | 0o755}
		if err := w.dst.Mkdir(h); err != nil {
			return err
		}
		w.dirs[p] = h
		w.fresh[p] = true
		w.mark(p)
	case sink.TypeSymlink:
		return fmt.Errorf("%w: %q is a symlink", sink.ErrSymlinkInPath, p)
	default:
		if !w.whited[p] {
			return fmt.Errorf("%w: parent %q is not a directory", ErrCorrupt, p)
		}
		// This layer whited out a lower p and now fills p: an opaque
		// directory replaces the whiteout device.
		h := &sink.Header{Path: p, Mode: sink.TypeDir | 0o755}
		if err := w.dst.Mkdir(h); err != nil {
			return err
		}
		delete(w.whited, p)
		w.dirs[p] = h
		w.fresh[p] = true
		w.mark(p)
		w.opaque = append(w.opaque, p)
	}
	w.isDir[p] = true
	return nil
}

// knowAll records the entries names of directory dir if they are few and
// all directories (a new ext4 volume holds lost+found), and reports
// whether it did: then every directory in dir is in isDir, what a fresh
// directory promises, and entries under dir need no lookup. Their
// metadata is kept in found and restored at the end only for those an
// entry writes into, as ensureDir does for a directory it finds.
func (w *walker) knowAll(dir string, names []string) bool {
	if len(names) > 4 {
		return false
	}
	hs := make([]*sink.Header, len(names))
	for i, n := range names {
		h, err := w.dst.Lstat(joinPath(dir, n))
		if err != nil || h.Type() != sink.TypeDir {
			return false
		}
		hs[i] = h
	}
	for i, n := range names {
		// Known, but left alone unless an entry goes into it (ensureDir).
		p := joinPath(dir, n)
		w.isDir[p], w.found[p] = true, hs[i]
	}
	return true
}

// remove deletes p and forgets what was known about it and below it.
func (w *walker) remove(p string) error {
	if par := parentOf(p); p != "." && w.dirs[par] == nil {
		// Keep the parent's metadata across the removal.
		if h, err := w.dst.Lstat(par); err == nil && h.Type() == sink.TypeDir {
			w.dirs[par] = h
		}
	}
	if err := w.dst.RemoveAll(p); err != nil {
		return err
	}
	prefix := p + "/"
	for _, m := range []map[string]bool{w.isDir, w.fresh} {
		for k := range m {
			if k == p || strings.HasPrefix(k, prefix) {
				delete(m, k)
			}
		}
	}
	for _, m := range []map[string]*sink.Header{w.dirs, w.found} {
		for k := range m {
			if k == p || strings.HasPrefix(k, prefix) {
				delete(m, k)
			}
		}
	}
	return nil
}

// finish hides lower entries of opaque directories (modeLayer) or marks
// them (modeOverlayFS), then applies directory metadata deepest first.
func (w *walker) finish() error {
	for _, o := range w.opaque {
		if !w.isDir[o] {
			continue // replaced later in the layer
		}
		switch w.mode {
		case modeLayer:
			if err := w.prune(o); err != nil {
				return err
			}
		case modeOverlayFS:
			h := w.dirs[o]
			if h == nil {
				var err error
				if h, err = w.dst.Lstat(o); err != nil {
					return err
				}
				w.dirs[o] = h
			}
			x := maps.Clone(h.Xattrs)
			if x == nil {
				x = map[string][]byte{}
			}
			x[w.opaqueKey] = []byte("y")
			h.Xattrs = x
		}
	}
	paths := slices.Collect(maps.Keys(w.dirs))
	slices.SortFunc(paths, func(a, b string) int {
		if d := depth(b) - depth(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, p := range paths {
		if err := w.dst.Mkdir(w.dirs[p]); err != nil {
			return fmt.Errorf("directory %q: %w", p, err)
		}
	}
	return nil
}

// prune removes everything under dir that this layer did not write.
func (w *walker) prune(dir string) error {
	names, err := w.dst.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		c := joinPath(dir, n)
		if !w.layer[c] {
			if err := w.remove(c); err != nil {
				return err
			}
			continue
		}
		if w.isDir[c] {
			if err := w.prune(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// header converts a tar header into a sink header for path p, checking
// every number before it is narrowed.
func header(hdr *tar.Header, p string) (*sink.Header, error) {
	h := &sink.Header{Path: p, Linkname: hdr.Linkname}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeCont, tar.TypeLink:
		h.Mode = sink.TypeReg
		if hdr.Typeflag != tar.TypeLink {
			h.Size = hdr.Size
		}
	case tar.TypeDir:
		h.Mode = sink.TypeDir
	case tar.TypeSymlink:
		h.Mode = sink.TypeSymlink
		if hdr.Linkname == "" {
			return nil, fmt.Errorf("%w: symlink with an empty target", ErrCorrupt)
		}
	case tar.TypeChar:
		h.Mode = sink.TypeChar
	case tar.TypeBlock:
		h.Mode = sink.TypeBlock
	case tar.TypeFifo:
		h.Mode = sink.TypeFifo
	default:
		return nil, fmt.Errorf("%w: entry type %q", ErrUnsupported, hdr.Typeflag)
	}
	if h.Size < 0 {
		return nil, fmt.Errorf("%w: negative size", ErrCorrupt)
	}
	h.Mode |= uint32(hdr.Mode) & sink.ModePerm
	for _, v := range []int64{int64(hdr.Uid), int64(hdr.Gid), hdr.Devmajor, hdr.Devminor} {
		if v < 0 || v > math.MaxUint32 {
			return nil, fmt.Errorf("%w: uid, gid or device number %d out of range", ErrCorrupt, v)
		}
	}
	h.UID, h.GID = uint32(hdr.Uid), uint32(hdr.Gid)
	if h.Type() == sink.TypeChar || h.Type() == sink.TypeBlock {
		h.Devmajor, h.Devminor = uint32(hdr.Devmajor), uint32(hdr.Devminor)
	}
	h.Mtime, h.Atime, h.Ctime = hdr.ModTime, hdr.AccessTime, hdr.ChangeTime
	if h.Atime.IsZero() {
		h.Atime = h.Mtime
	}
	x, crtime, err := paxExtras(hdr.PAXRecords)
	if err != nil {
		return nil, err
	}
	h.Xattrs, h.Crtime = x, crtime
	return h, nil
}

// PAX record names for metadata plain ustar cannot hold.
const (
	paxSchilyXattr    = "SCHILY.xattr."
	paxLibarchiveXatr = "LIBARCHIVE.xattr."
	paxRHTSELinux     = "RHT.security.selinux"
	paxCrtime         = "LIBARCHIVE.creationtime"
)

// paxExtras extracts xattrs (SCHILY.xattr.NAME=raw value, as GNU tar and
// star write them; LIBARCHIVE.xattr.URL-ENCODED-NAME=base64 value, as bsdtar
// does; RHT.security.selinux) and the creation time.
func paxExtras(recs map[string]string) (map[string][]byte, time.Time, error) {
	var x map[string][]byte
	var crtime time.Time
	put := func(k string, v []byte) {
		if x == nil {
			x = map[string][]byte{}
		}
		x[k] = v
	}
	for k, v := range recs {
		switch {
		case strings.HasPrefix(k, paxSchilyXattr):
			put(k[len(paxSchilyXattr):], []byte(v))
		case strings.HasPrefix(k, paxLibarchiveXatr):
			name, err := url.PathUnescape(k[len(paxLibarchiveXatr):])
			if err != nil {
				return nil, crtime, fmt.Errorf("%w: xattr name %q: %w", ErrCorrupt, k, err)
			}
			val, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				val, err = base64.RawStdEncoding.DecodeString(v)
			}
			if err != nil {
				return nil, crtime, fmt.Errorf("%w: xattr %q value: %w", ErrCorrupt, name, err)
			}
			if _, dup := x[name]; !dup {
				put(name, val)
			}
		case k == paxRHTSELinux:
			put("security.selinux", []byte(v))
		case k == paxCrtime:
			t, err := parsePAXTime(v)
			if err != nil {
				return nil, crtime, fmt.Errorf("%w: %s: %w", ErrCorrupt, k, err)
			}
			crtime = t
		}
	}
	for k := range x {
		if k == "" || strings.IndexByte(k, 0) >= 0 {
			return nil, crtime, fmt.Errorf("%w: bad xattr name %q", ErrCorrupt, k)
		}
	}
	return x, crtime, nil
}

// parsePAXTime parses "SECONDS[.FRACTION]" as PAX times are written.
func parsePAXTime(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, err := strconv.ParseUint(frac, 10, 64)
		if err != nil {
			return time.Time{}, err
		}
		ns = int64(f)
		for i := len(frac); i < 9; i++ {
			ns *= 10
		}
	}
	if strings.HasPrefix(sec, "-") && ns != 0 {
		return time.Unix(n, -ns), nil
	}
	return time.Unix(n, ns), nil
}
