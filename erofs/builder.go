package erofs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/internal/termsafe"
	"z.gfire.dev/gvx/sink"
)

// Profile selects what an image may hold.
type Profile int

const (
	// ProfileFull keeps everything EROFS can store: tail-packed inline data
	// (FLAT_INLINE) and xattrs, inline and shared. For the kernel and
	// erofs-utils.
	ProfileFull Profile = iota
	// ProfileRuntime writes what gVisor's Sentry mounts: regular files
	// FLAT_PLAIN (the Sentry mmaps them straight from the image), no
	// xattrs. Directories and symlinks keep inline tails, which gVisor's
	// reader handles (as mkfs.erofs -E noinline_data does; it saves a block
	// per small directory and symlink). Dropped xattrs are listed in the
	// Report's Warnings, never silently lost.
	ProfileRuntime
)

func (p Profile) String() string {
	switch p {
	case ProfileFull:
		return "full"
	case ProfileRuntime:
		return "runtime"
	}
	return fmt.Sprintf("Profile(%d)", int(p))
}

// MarshalText makes Profile print as its name in JSON.
func (p Profile) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a profile name.
func (p *Profile) UnmarshalText(b []byte) error {
	v, err := ParseProfile(string(b))
	*p = v
	return err
}

// ParseProfile parses "full" or "runtime".
func ParseProfile(s string) (Profile, error) {
	switch s {
	case "full":
		return ProfileFull, nil
	case "runtime":
		return ProfileRuntime, nil
	}
	return 0, fmt.Errorf("erofs: unknown profile %q (want full or runtime)", s)
}

// Options configure a Builder. The zero value is a full-profile builder
// that holds up to 64 MiB of file data in memory before spooling to a
// temporary file in os.TempDir.
type Options struct {
	Profile Profile
	// Epoch is the image's base time: the superblock's build time and the
	// mtime of every compact inode. Zero means the most common mtime in
	// the tree (earliest on ties), which makes the most inodes compact and
	// keeps output a function of the tree alone.
	Epoch time.Time
	// UUID and VolumeName go to the superblock verbatim (VolumeName cut
	// to its 16 bytes).
	UUID       [16]byte
	VolumeName string
	// TempDir is where file data is spooled; "" means os.TempDir().
	TempDir string
	// Workers is how many goroutines AddDir scans with and WriteTo writes
	// a file with; 0 means GOMAXPROCS. The image's bytes do not depend on
	// it.
	Workers int
	// MemoryLimit is how many bytes of file data are kept in memory before
	// spooling; 0 means 64 MiB, negative means always spool.
	MemoryLimit int64
	// Path is where Finish publishes the image (atomically).
	Path string
}

// Report describes a built image.
type Report struct {
	Profile  Profile  `json:"profile"`
	Inodes   int64    `json:"inodes"`
	Blocks   int64    `json:"blocks"`
	Bytes    int64    `json:"bytes"`
	Warnings []string `json:"warnings,omitempty"` // what the profile dropped
	// Dropped counts every dropped item, even past the Warnings cap.
	Dropped int `json:"dropped"`
}

const maxWarnings = 1000

// Builder is an in-memory tree that becomes an EROFS image. It implements
// sink.Sink (so any walker can fill it), sink.Source (so it can be compared
// with what is read back) and sink.Finisher. It is not safe for concurrent
// use. Close it to remove its spool file.
type Builder struct {
	opts   Options
	root   *inode
	spool  spool
	nextID uint64
	gen    uint64 // bumped by every change, for callers caching a view
	report Report
	closed bool
	roots  []*hostRoot // AddDir's directories, open until Close
	mark   uint64      // order's last visit mark
}

// inode is one file of the tree; hard links share it.
type inode struct {
	id     uint64 // creation order: Header.Ino of the builder's view
	mode   uint32
	uid    uint32
	gid    uint32
	mtime  time.Time
	atime  time.Time // kept for Lstat only: EROFS stores one time, mtime
	xattrs map[string][]byte
	nlink  uint32 // non-directories: names pointing here

	size    int64         // regular files
	dataOff int64         // regular files: offset in the spool
	regions []sink.Region // sparse regular files: the data regions (content.go)
	host    *hostFile     // regular files from AddDir: read at WriteTo, not spooled
	link    string
	rdev    uint32

	kids   map[string]*inode // directories
	parent *inode            // directories
	sorted []dirent          // directories: kids by name, filled by order
	mark   uint64            // order's visit mark

	l layout // filled when the image is laid out
}

var (
	_ sink.Sink     = (*Builder)(nil)
	_ sink.Source   = (*Builder)(nil)
	_ sink.Finisher = (*Builder)(nil)
)

// NewBuilder returns an empty tree whose root is a directory with mode 0755
// owned by 0:0 at the Unix epoch.
func NewBuilder(opts Options) *Builder {
	b := &Builder{opts: opts}
	b.spool.dir = opts.TempDir
	switch {
	case opts.MemoryLimit == 0:
		b.spool.limit = 64 << 20
	case opts.MemoryLimit > 0:
		b.spool.limit = opts.MemoryLimit
	}
	b.root = b.newInode(sink.TypeDir|0o755, &sink.Header{})
	b.root.kids = map[string]*inode{}
	b.root.parent = b.root
	b.report.Profile = opts.Profile
	return b
}

// Close releases the spool. The builder is unusable afterwards.
func (b *Builder) Close() error {
	b.closed = true
	err := b.spool.close()
	for _, r := range b.roots {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}
	b.roots = nil
	return err
}

// Report returns what the builder dropped so far and, after WriteTo, the
// image's geometry.
func (b *Builder) Report() Report {
	r := b.report
	r.Warnings = slices.Clone(r.Warnings)
	return r
}

func (b *Builder) warnf(format string, args ...any) {
	b.report.Dropped++
	if len(b.report.Warnings) < maxWarnings {
		b.report.Warnings = append(b.report.Warnings, fmt.Sprintf(format, args...))
	}
}

func (b *Builder) workers() int {
	if b.opts.Workers > 0 {
		return b.opts.Workers
	}
	return runtime.GOMAXPROCS(0)
}

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0)
	}
	return time.Unix(t.Unix(), int64(t.Nanosecond()))
}

func (b *Builder) newInode(mode uint32, h *sink.Header) *inode {
	b.nextID++
	return &inode{id: b.nextID, mode: mode, uid: h.UID, gid: h.GID, mtime: normTime(h.Mtime), atime: normTime(h.Atime), nlink: 1}
}

// setMeta applies h's owner, times, permission bits and xattrs to n.
func (b *Builder) setMeta(n *inode, h *sink.Header) error {
	x, err := b.checkXattrs(h)
	if err != nil {
		return err
	}
	n.mode = n.mode&sink.TypeMask | h.Mode&sink.ModePerm
	n.uid, n.gid = h.UID, h.GID
	n.mtime = normTime(h.Mtime)
	n.atime = normTime(h.Atime)
	n.xattrs = x
	b.gen++
	return nil
}

func (b *Builder) checkXattrs(h *sink.Header) (map[string][]byte, error) {
	if len(h.Xattrs) == 0 {
		return nil, nil
	}
	if b.opts.Profile == ProfileRuntime {
		for _, k := range slices.Sorted(maps.Keys(h.Xattrs)) {
			// The layer's names: a terminal shows the warning.
			b.warnf("%s: dropped xattr %s (runtime profile stores no xattrs)", termsafe.String(h.Path), termsafe.String(k))
		}
		return nil, nil
	}
	x := make(map[string][]byte, len(h.Xattrs))
	for k, v := range h.Xattrs {
		if _, _, err := xattrSplit(k); err != nil {
			return nil, &fs.PathError{Op: "setxattr", Path: h.Path, Err: err}
		}
		if len(v) > disk.XattrValueMax {
			return nil, &fs.PathError{Op: "setxattr", Path: h.Path,
				Err: fmt.Errorf("%w: xattr %s value of %d bytes (EROFS holds at most %d)", ErrUnsupported, k, len(v), disk.XattrValueMax)}
		}
		x[k] = bytes.Clone(v)
	}
	return x, nil
}

var (
	errNotDir        = errors.New("not a directory")
	errBuilderClosed = errors.New("erofs: builder is closed")
)

// checkPath enforces package sink's path rules.
func checkPath(op, p string) error {
	if p == "." {
		return nil
	}
	if p == "" || strings.HasPrefix(p, "/") {
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
	}
	for e := range strings.SplitSeq(p, "/") {
		if e == "" || e == "." || e == ".." {
			return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
		}
		if len(e) > disk.NameLen {
			return &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w: name longer than %d bytes", ErrUnsupported, disk.NameLen)}
		}
		if strings.IndexByte(e, 0) >= 0 {
			return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
		}
	}
	return nil
}

// resolveParent returns the directory that holds p's last element, and
// that element. No symlink is followed.
func (b *Builder) resolveParent(op, p string) (*inode, string, error) {
	if b.closed {
		return nil, "", errBuilderClosed
	}
	if err := checkPath(op, p); err != nil {
		return nil, "", err
	}
	if p == "." {
		return nil, ".", nil
	}
	dir := b.root
	rest := p
	for {
		elem, tail, more := strings.Cut(rest, "/")
		if !more {
			return dir, elem, nil
		}
		next := dir.kids[elem]
		switch {
		case next == nil:
			return nil, "", &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
		case next.mode&sink.TypeMask == sink.TypeSymlink:
			return nil, "", &fs.PathError{Op: op, Path: p, Err: sink.ErrSymlinkInPath}
		case next.kids == nil:
			return nil, "", &fs.PathError{Op: op, Path: p, Err: errNotDir}
		}
		dir, rest = next, tail
	}
}

func (b *Builder) lookup(op, p string) (*inode, error) {
	dir, name, err := b.resolveParent(op, p)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		return b.root, nil
	}
	n := dir.kids[name]
	if n == nil {
		return nil, &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	}
	return n, nil
}

// place links n at p, replacing a non-directory; a directory there is an
// error.
func (b *Builder) place(op, p string, n *inode) error {
	dir, name, err := b.resolveParent(op, p)
	if err != nil {
		return err
	}
	if dir == nil {
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrExist}
	}
	if old := dir.kids[name]; old != nil {
		if old.kids != nil {
			return &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w: a directory is in the way", fs.ErrExist)}
		}
		old.nlink--
	}
	dir.kids[name] = n
	b.gen++
	return nil
}

// Mkdir implements sink.Sink.
func (b *Builder) Mkdir(h *sink.Header) error {
	if t := h.Type(); t != 0 && t != sink.TypeDir {
		return &fs.PathError{Op: "mkdir", Path: h.Path, Err: fmt.Errorf("mode %#o is not a directory: %w", h.Mode, fs.ErrInvalid)}
	}
	dir, name, err := b.resolveParent("mkdir", h.Path)
	if err != nil {
		return err
	}
	var existing *inode
	if dir == nil {
		existing = b.root
	} else if old := dir.kids[name]; old != nil && old.kids != nil {
		existing = old
	}
	if existing != nil {
		return b.setMeta(existing, h)
	}
	n := b.newInode(sink.TypeDir, h)
	if err := b.setMeta(n, h); err != nil {
		return err
	}
	n.kids = map[string]*inode{}
	n.parent = dir
	return b.place("mkdir", h.Path, n)
}

// WriteFile implements sink.Sink. The data is spooled; all of h.Size bytes
// must come from r.
func (b *Builder) WriteFile(h *sink.Header, r io.Reader) error {
	if err := b.checkFile(h); err != nil {
		return err
	}
	if r == nil && h.Size > 0 {
		return &fs.PathError{Op: "write", Path: h.Path, Err: fmt.Errorf("no reader for %d bytes: %w", h.Size, fs.ErrInvalid)}
	}
	n, err := b.newFile(h)
	if err != nil {
		return err
	}
	if sp, ok := r.(*sink.Sparse); ok && sp.Size() == h.Size {
		// Only the data is spooled; holes are never read.
		n.size, n.dataOff, n.regions = h.Size, b.spool.size, sp.Regions()
		if n.regions == nil {
			n.regions = []sink.Region{}
		}
		err := sp.WriteRegions(func(_ int64, r io.Reader, k int64) error {
			_, err := b.spool.add(r, k)
			return err
		})
		if err != nil {
			return &fs.PathError{Op: "write", Path: h.Path, Err: err}
		}
		return b.place("write", h.Path, n)
	}
	off, err := b.spool.addFile(r, h.Size)
	if err != nil {
		return &fs.PathError{Op: "write", Path: h.Path, Err: err}
	}
	n.size, n.dataOff = h.Size, off
	return b.place("write", h.Path, n)
}

// checkFile checks what WriteFile and AddDir's regular files have in common.
func (b *Builder) checkFile(h *sink.Header) error {
	if t := h.Type(); t != 0 && t != sink.TypeReg {
		return &fs.PathError{Op: "write", Path: h.Path, Err: fmt.Errorf("mode %#o is not a regular file: %w", h.Mode, fs.ErrInvalid)}
	}
	if h.Size < 0 {
		return &fs.PathError{Op: "write", Path: h.Path, Err: fmt.Errorf("negative size %d: %w", h.Size, fs.ErrInvalid)}
	}
	_, _, err := b.resolveParent("write", h.Path)
	return err
}

// newFile is a regular file's inode with h's metadata, not yet placed.
func (b *Builder) newFile(h *sink.Header) (*inode, error) {
	n := b.newInode(sink.TypeReg, h)
	if err := b.setMeta(n, h); err != nil {
		return nil, err
	}
	return n, nil
}

// addHostFile places a regular file whose h.Size bytes WriteTo reads from
// the host (AddDir).
func (b *Builder) addHostFile(h *sink.Header, f *hostFile) error {
	if err := b.checkFile(h); err != nil {
		return err
	}
	n, err := b.newFile(h)
	if err != nil {
		return err
	}
	n.size, n.host = h.Size, f
	return b.place("write", h.Path, n)
}

// Symlink implements sink.Sink.
func (b *Builder) Symlink(h *sink.Header) error {
	if t := h.Type(); t != 0 && t != sink.TypeSymlink {
		return &fs.PathError{Op: "symlink", Path: h.Path, Err: fmt.Errorf("mode %#o is not a symlink: %w", h.Mode, fs.ErrInvalid)}
	}
	if h.Linkname == "" || len(h.Linkname) >= disk.BlockSize {
		return &fs.PathError{Op: "symlink", Path: h.Path, Err: fmt.Errorf("target of %d bytes (want 1..%d): %w", len(h.Linkname), disk.BlockSize-1, fs.ErrInvalid)}
	}
	n := b.newInode(sink.TypeSymlink, h)
	if err := b.setMeta(n, h); err != nil {
		return err
	}
	if h.Mode&sink.ModePerm == 0 {
		n.mode |= 0o777
	}
	n.link = h.Linkname
	return b.place("symlink", h.Path, n)
}

// Mknod implements sink.Sink.
func (b *Builder) Mknod(h *sink.Header) error {
	t := h.Type()
	switch t {
	case sink.TypeChar, sink.TypeBlock:
		if h.Devmajor > 0xfff || h.Devminor > 0xfffff {
			return &fs.PathError{Op: "mknod", Path: h.Path, Err: fmt.Errorf("%w: device %d:%d does not fit 12:20 bits", ErrUnsupported, h.Devmajor, h.Devminor)}
		}
	case sink.TypeFifo, sink.TypeSocket:
	default:
		return &fs.PathError{Op: "mknod", Path: h.Path, Err: fmt.Errorf("mode %#o is not a device, fifo or socket: %w", h.Mode, fs.ErrInvalid)}
	}
	n := b.newInode(t, h)
	if err := b.setMeta(n, h); err != nil {
		return err
	}
	if t == sink.TypeChar || t == sink.TypeBlock {
		n.rdev = disk.EncodeDev(h.Devmajor, h.Devminor)
	}
	return b.place("mknod", h.Path, n)
}

// Link implements sink.Sink.
func (b *Builder) Link(oldname, newname string) error {
	old, err := b.lookup("link", oldname)
	if err != nil {
		return err
	}
	if old.kids != nil {
		return &fs.PathError{Op: "link", Path: oldname, Err: fmt.Errorf("%w: hard link to a directory", fs.ErrInvalid)}
	}
	if cur, err := b.lookup("link", newname); err == nil && cur == old {
		return nil
	}
	if err := b.place("link", newname, old); err != nil {
		return err
	}
	old.nlink++
	return nil
}

// RemoveAll implements sink.Sink. RemoveAll(".") empties the root.
func (b *Builder) RemoveAll(p string) error {
	dir, name, err := b.resolveParent("removeall", p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b.gen++
	if dir == nil {
		unlinkAll(b.root)
		return nil
	}
	if n := dir.kids[name]; n != nil {
		unlinkAll(n)
		n.nlink--
		delete(dir.kids, name)
	}
	return nil
}

// unlinkAll drops the names below directory n, so hard links elsewhere
// count right.
func unlinkAll(n *inode) {
	for name, k := range n.kids {
		unlinkAll(k)
		k.nlink--
		delete(n.kids, name)
	}
}

// Lstat implements sink.Sink and sink.Source. Ino is the builder's own
// identity of the inode (hard links share it).
func (b *Builder) Lstat(p string) (*sink.Header, error) {
	n, err := b.lookup("lstat", p)
	if err != nil {
		return nil, err
	}
	h := &sink.Header{
		Path: p, Mode: n.mode, UID: n.uid, GID: n.gid, Mtime: n.mtime, Atime: n.atime,
		Linkname: n.link, Ino: n.id, Nlink: n.nlink,
	}
	switch n.mode & sink.TypeMask {
	case sink.TypeReg:
		h.Size = n.size
	case sink.TypeDir:
		h.Nlink = 2
		for _, k := range n.kids {
			if k.kids != nil {
				h.Nlink++
			}
		}
	case sink.TypeChar, sink.TypeBlock:
		h.Devmajor, h.Devminor = disk.DecodeDev(n.rdev)
	}
	if len(n.xattrs) > 0 {
		h.Xattrs = maps.Clone(n.xattrs)
	}
	return h, nil
}

// ReadDir implements sink.Sink and sink.Source.
func (b *Builder) ReadDir(p string) ([]string, error) {
	n, err := b.lookup("readdir", p)
	if err != nil {
		return nil, err
	}
	if n.kids == nil {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: errNotDir}
	}
	return slices.Sorted(maps.Keys(n.kids)), nil
}

// Open implements sink.Source.
func (b *Builder) Open(p string) (io.ReadCloser, error) {
	n, err := b.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if n.mode&sink.TypeMask != sink.TypeReg {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("not a regular file: %w", fs.ErrInvalid)}
	}
	c, err := b.content(n)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	// Seekable and an io.ReaderAt, as ext4lite's: exporters seek over holes.
	return struct {
		*io.SectionReader
		io.Closer
	}{io.NewSectionReader(c, 0, n.size), closerFunc(c.close)}, nil
}

// DataRegions implements sink.DataMapper: a file written from a
// *sink.Sparse has its regions, any other one is all data.
func (b *Builder) DataRegions(p string) ([]sink.Region, error) {
	n, err := b.lookup("dataregions", p)
	if err != nil {
		return nil, err
	}
	if n.mode&sink.TypeMask != sink.TypeReg {
		return nil, &fs.PathError{Op: "dataregions", Path: p, Err: fmt.Errorf("not a regular file: %w", fs.ErrInvalid)}
	}
	if n.regions != nil {
		return slices.Clone(n.regions), nil
	}
	if n.size == 0 {
		return nil, nil
	}
	return []sink.Region{{Off: 0, Len: n.size}}, nil
}

// Finish implements sink.Finisher: it publishes the image at Options.Path
// atomically (temporary file, fsync, rename, fsync of the directory) and
// closes the builder.
func (b *Builder) Finish() error {
	if b.opts.Path == "" {
		return errors.New("erofs: Finish needs Options.Path (or call WriteTo)")
	}
	err := WriteFileAtomic(b.opts.Path, func(f *os.File) error {
		_, err := b.writeTo(f, true) // WriteFileAtomic fsyncs it next
		return err
	})
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
