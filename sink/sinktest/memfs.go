package sinktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"time"

	"z.gfire.dev/gvx/sink"
)

// BlockSize is the granularity at which MemFS stores file data: all-zero
// blocks are kept as holes, so sparse files of many GiB cost nothing.
const BlockSize = 4096

// ErrFull reports a write beyond MemFS.MaxBytes.
var ErrFull = errors.New("sinktest: MemFS is full")

// MemFS is an in-memory tree implementing both sink.Sink and sink.Source
// exactly as the contract in package sink describes. It is the reference
// implementation other sinks are compared with, and a cheap target for
// walkers' tests and fuzzing. It is safe for concurrent use.
type MemFS struct {
	// MaxBytes caps the non-zero file data held, in bytes; 0 means no cap.
	// Set it before the first write (fuzz targets use it to bound memory).
	MaxBytes int64

	mu      sync.Mutex
	root    *node
	nextIno uint64
	used    int64
}

type node struct {
	h      sink.Header      // Path is unused; Ino is the node's identity
	nlink  uint32           // non-directories: number of names
	blocks map[int64][]byte // regular files: the non-zero BlockSize blocks
	kids   map[string]*node // directories
}

// NewMemFS returns an empty tree whose root is a directory with mode 0755,
// owned by 0:0, with all times at the Unix epoch.
func NewMemFS() *MemFS {
	m := &MemFS{}
	m.root = m.newNode(&sink.Header{Mode: sink.TypeDir | 0o755})
	m.root.kids = map[string]*node{}
	return m
}

var epoch = time.Unix(0, 0)

// normTime maps the zero time to the epoch and drops location and monotonic
// readings, so stored times compare with ==.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return epoch
	}
	return time.Unix(t.Unix(), int64(t.Nanosecond()))
}

func (m *MemFS) newNode(h *sink.Header) *node {
	m.nextIno++
	n := &node{h: *h, nlink: 1}
	n.h.Path = ""
	n.h.Ino = m.nextIno
	n.h.Linkname = ""
	n.h.Size = 0
	n.h.Nlink = 0
	n.h.Atime = normTime(h.Atime)
	n.h.Mtime = normTime(h.Mtime)
	n.h.Ctime = normTime(h.Ctime)
	n.h.Crtime = normTime(h.Crtime)
	n.h.Xattrs = cloneXattrs(h.Xattrs)
	switch h.Type() {
	case sink.TypeChar, sink.TypeBlock:
	default:
		n.h.Devmajor, n.h.Devminor = 0, 0
	}
	return n
}

func cloneXattrs(x map[string][]byte) map[string][]byte {
	if len(x) == 0 {
		return nil
	}
	c := make(map[string][]byte, len(x))
	for k, v := range x {
		c[k] = bytes.Clone(v)
	}
	return c
}

// lookupDir walks the directory elements of p (all but the last) and returns
// the parent directory node and the final name. It never follows a symlink.
func (m *MemFS) lookupDir(op, p string) (*node, string, error) {
	if err := checkPath(op, p); err != nil {
		return nil, "", err
	}
	if p == "." {
		return nil, ".", nil
	}
	el := split(p)
	dir := m.root
	for i, e := range el[:len(el)-1] {
		n, ok := dir.kids[e]
		if !ok {
			return nil, "", &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
		}
		switch n.h.Type() {
		case sink.TypeDir:
			dir = n
		case sink.TypeSymlink:
			return nil, "", &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w (at %q)", sink.ErrSymlinkInPath, join3(el[:i+1]))}
		default:
			return nil, "", &fs.PathError{Op: op, Path: p, Err: errNotDir}
		}
	}
	return dir, el[len(el)-1], nil
}

func join3(el []string) string {
	s := el[0]
	for _, e := range el[1:] {
		s += "/" + e
	}
	return s
}

// lookup returns the node at p without following a final symlink.
func (m *MemFS) lookup(op, p string) (*node, error) {
	dir, name, err := m.lookupDir(op, p)
	if err != nil {
		return nil, err
	}
	if dir == nil {
		return m.root, nil
	}
	n, ok := dir.kids[name]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	}
	return n, nil
}

// place puts n at p, replacing a non-directory; a directory there is an error.
func (m *MemFS) place(op, p string, n *node) error {
	dir, name, err := m.lookupDir(op, p)
	if err != nil {
		return err
	}
	if dir == nil {
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrExist}
	}
	if old, ok := dir.kids[name]; ok {
		if old.h.Type() == sink.TypeDir {
			return &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w: is a directory", fs.ErrExist)}
		}
		if old == n {
			return nil
		}
		m.unref(old)
	}
	dir.kids[name] = n
	return nil
}

// unref drops one name of n (recursively for directories).
func (m *MemFS) unref(n *node) {
	if n.h.Type() == sink.TypeDir {
		for _, k := range n.kids {
			m.unref(k)
		}
		return
	}
	n.nlink--
	if n.nlink == 0 {
		for _, b := range n.blocks {
			m.used -= int64(len(b))
		}
	}
}

// Mkdir implements sink.Sink.
func (m *MemFS) Mkdir(h *sink.Header) error {
	if h.Type() != sink.TypeDir {
		return &fs.PathError{Op: "mkdir", Path: h.Path, Err: fmt.Errorf("%w: mode %o is not a directory", fs.ErrInvalid, h.Mode)}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, name, err := m.lookupDir("mkdir", h.Path)
	if err != nil {
		return err
	}
	var old *node
	if dir == nil {
		old = m.root
	} else if o, ok := dir.kids[name]; ok && o.h.Type() == sink.TypeDir {
		old = o
	}
	if old != nil {
		n := m.newNode(h)
		m.nextIno--
		n.h.Ino = old.h.Ino
		old.h = n.h
		return nil
	}
	n := m.newNode(h)
	n.kids = map[string]*node{}
	return m.place("mkdir", h.Path, n)
}

// WriteFile implements sink.Sink. It reads exactly h.Size bytes from r.
func (m *MemFS) WriteFile(h *sink.Header, r io.Reader) error {
	if h.Type() != sink.TypeReg {
		return &fs.PathError{Op: "writefile", Path: h.Path, Err: fmt.Errorf("%w: mode %o is not a regular file", fs.ErrInvalid, h.Mode)}
	}
	if h.Size < 0 {
		return &fs.PathError{Op: "writefile", Path: h.Path, Err: fmt.Errorf("%w: negative size", fs.ErrInvalid)}
	}
	// Check the path, and that no directory is in the way, before
	// consuming r.
	m.mu.Lock()
	dir, name, err := m.lookupDir("writefile", h.Path)
	if err == nil && dir == nil {
		err = &fs.PathError{Op: "writefile", Path: h.Path, Err: fs.ErrExist}
	} else if err == nil && dir.kids[name] != nil && dir.kids[name].h.Type() == sink.TypeDir {
		err = &fs.PathError{Op: "writefile", Path: h.Path, Err: fmt.Errorf("%w: is a directory", fs.ErrExist)}
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	blocks := map[int64][]byte{}
	var added int64
	if sp, ok := r.(*sink.Sparse); ok && sp.Size() == h.Size {
		// Region by region: the holes are never read.
		err := sp.WriteRegions(func(off int64, r io.Reader, n int64) error {
			for end := off + n; off < end; {
				bi, in := off/BlockSize, off%BlockSize
				b := blocks[bi]
				if b == nil {
					b = make([]byte, min(int64(BlockSize), h.Size-bi*BlockSize))
					added += int64(len(b))
					if m.MaxBytes > 0 && m.usedNow()+added > m.MaxBytes {
						return ErrFull
					}
					blocks[bi] = b
				}
				k := min(int64(len(b))-in, end-off)
				if _, err := io.ReadFull(r, b[in:in+k]); err != nil {
					return err
				}
				off += k
			}
			return nil
		})
		if err != nil {
			return &fs.PathError{Op: "writefile", Path: h.Path, Err: err}
		}
		return m.finishWrite(h, blocks, added)
	}
	buf := make([]byte, BlockSize)
	for off := int64(0); off < h.Size; off += BlockSize {
		n := min(int64(BlockSize), h.Size-off)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return &fs.PathError{Op: "writefile", Path: h.Path, Err: err}
		}
		if isZero(buf[:n]) {
			continue
		}
		added += n
		if m.MaxBytes > 0 && m.usedNow()+added > m.MaxBytes {
			return &fs.PathError{Op: "writefile", Path: h.Path, Err: ErrFull}
		}
		blocks[off/BlockSize] = bytes.Clone(buf[:n])
	}
	return m.finishWrite(h, blocks, added)
}

// finishWrite places the file h holding blocks.
func (m *MemFS) finishWrite(h *sink.Header, blocks map[int64][]byte, added int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.newNode(h)
	n.h.Size = h.Size
	n.blocks = blocks
	if err := m.place("writefile", h.Path, n); err != nil {
		return err
	}
	m.used += added
	return nil
}

func (m *MemFS) usedNow() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

var zeroBlock [4096]byte

// isZero reports whether b (at most 4096 bytes) is all zeros; bytes.Equal
// runs at memory speed, which matters for multi-GiB sparse files.
func isZero(b []byte) bool {
	return bytes.Equal(b, zeroBlock[:len(b)])
}

// Symlink implements sink.Sink.
func (m *MemFS) Symlink(h *sink.Header) error {
	if h.Type() != sink.TypeSymlink {
		return &fs.PathError{Op: "symlink", Path: h.Path, Err: fmt.Errorf("%w: mode %o is not a symlink", fs.ErrInvalid, h.Mode)}
	}
	if h.Linkname == "" {
		return &fs.PathError{Op: "symlink", Path: h.Path, Err: fmt.Errorf("%w: empty target", fs.ErrInvalid)}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.newNode(h)
	n.h.Linkname = h.Linkname
	n.h.Size = int64(len(h.Linkname))
	return m.place("symlink", h.Path, n)
}

// Mknod implements sink.Sink.
func (m *MemFS) Mknod(h *sink.Header) error {
	switch h.Type() {
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
	default:
		return &fs.PathError{Op: "mknod", Path: h.Path, Err: fmt.Errorf("%w: mode %o is not a device, fifo or socket", fs.ErrInvalid, h.Mode)}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.place("mknod", h.Path, m.newNode(h))
}

// Link implements sink.Sink.
func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, err := m.lookup("link", oldname)
	if err != nil {
		return err
	}
	if old.h.Type() == sink.TypeDir {
		return &fs.PathError{Op: "link", Path: oldname, Err: fmt.Errorf("%w: hard link to a directory", fs.ErrInvalid)}
	}
	if cur, err := m.lookup("link", newname); err == nil && cur == old {
		return nil
	}
	old.nlink++
	if err := m.place("link", newname, old); err != nil {
		old.nlink--
		return err
	}
	return nil
}

// RemoveAll implements sink.Sink. Removing the root is refused.
func (m *MemFS) RemoveAll(p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, name, err := m.lookupDir("removeall", p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir):
		return nil
	case err != nil:
		return err
	case dir == nil:
		return &fs.PathError{Op: "removeall", Path: p, Err: fmt.Errorf("%w: cannot remove the root", fs.ErrInvalid)}
	}
	if n, ok := dir.kids[name]; ok {
		m.unref(n)
		delete(dir.kids, name)
	}
	return nil
}

// Lstat implements sink.Sink and sink.Source.
func (m *MemFS) Lstat(p string) (*sink.Header, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("lstat", p)
	if err != nil {
		return nil, err
	}
	h := n.h
	h.Path = p
	h.Xattrs = cloneXattrs(n.h.Xattrs)
	if n.h.Type() == sink.TypeDir {
		h.Nlink = 2
		for _, k := range n.kids {
			if k.h.Type() == sink.TypeDir {
				h.Nlink++
			}
		}
	} else {
		h.Nlink = n.nlink
	}
	return &h, nil
}

// ReadDir implements sink.Sink and sink.Source.
func (m *MemFS) ReadDir(p string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", p)
	if err != nil {
		return nil, err
	}
	if n.h.Type() != sink.TypeDir {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: errNotDir}
	}
	return slices.Sorted(maps.Keys(n.kids)), nil
}

// Open implements sink.Source.
func (m *MemFS) Open(p string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if n.h.Type() != sink.TypeReg {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("%w: not a regular file", fs.ErrInvalid)}
	}
	return &memReader{blocks: n.blocks, size: n.h.Size}, nil
}

// DataRegions implements sink.DataMapper: the file's stored blocks, merged
// where adjacent, clipped to its size.
func (m *MemFS) DataRegions(p string) ([]sink.Region, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("dataregions", p)
	if err != nil {
		return nil, err
	}
	if n.h.Type() != sink.TypeReg {
		return nil, &fs.PathError{Op: "dataregions", Path: p, Err: fmt.Errorf("%w: not a regular file", fs.ErrInvalid)}
	}
	var out []sink.Region
	for _, bi := range slices.Sorted(maps.Keys(n.blocks)) {
		off := bi * BlockSize
		l := min(int64(BlockSize), n.h.Size-off)
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == off {
			out[k].Len += l
			continue
		}
		out = append(out, sink.Region{Off: off, Len: l})
	}
	return out, nil
}

// DataBytes returns the number of non-zero file bytes held (holes excluded).
func (m *MemFS) DataBytes() int64 { return m.usedNow() }

// memReader reads a snapshot of a file; blocks are never mutated in place
// (a rewrite makes a new node), so no lock is needed.
type memReader struct {
	blocks map[int64][]byte
	size   int64
	off    int64
}

// ReadAt reads at off without moving the Read position.
func (r *memReader) ReadAt(p []byte, off int64) (int, error) {
	c := memReader{blocks: r.blocks, size: r.size, off: off}
	n, err := io.ReadFull(&c, p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

// Seek moves the Read position (exporters seek over holes).
func (r *memReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.off
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return 0, fs.ErrInvalid
	}
	r.off = off
	return off, nil
}

func (r *memReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.off < r.size {
		bi, bo := r.off/BlockSize, r.off%BlockSize
		want := min(int64(len(p)-n), BlockSize-bo, r.size-r.off)
		if b, ok := r.blocks[bi]; ok {
			copy(p[n:n+int(want)], b[bo:bo+want])
		} else {
			clear(p[n : n+int(want)])
		}
		n += int(want)
		r.off += want
	}
	return n, nil
}

func (r *memReader) Close() error { return nil }

var (
	_ sink.Sink   = (*MemFS)(nil)
	_ sink.Source = (*MemFS)(nil)
)
