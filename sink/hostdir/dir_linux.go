package hostdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
)

// parent is an open parent directory and the final name in it. For the
// root, fd is the root itself and name is ".".
type parent struct {
	fd   int
	name string
}

func (p parent) close() { unix.Close(p.fd) }

// procPath names the entry through the pinned parent fd, for the xattr
// calls that have no *at form; the l* variants do not follow a final
// symlink and the parent is a directory, so nothing is followed.
func (p parent) procPath() string {
	return "/proc/self/fd/" + strconv.Itoa(p.fd) + "/" + p.name
}

// dirCache keeps the directories walked to open (up to dirCacheMax), so
// an entry costs one dup instead of a walk from the root, and a walk starts
// at its deepest cached ancestor. Only RemoveAll can make a cached directory
// go away, and it empties the cache.
type dirCache struct {
	mu  sync.Mutex
	fds map[string]int // sink path ("." for the root) → O_PATH fd
}

const dirCacheMax = 64

func newDirCache() *dirCache { return &dirCache{fds: map[string]int{}} }

func (c *dirCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	clear(c.fds)
}

// get returns a duplicate of the cached fd for dir, or -1.
func (c *dirCache) get(dir string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfd, ok := c.fds[dir]
	if !ok {
		return -1
	}
	fd, err := unix.FcntlInt(uintptr(cfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func (c *dirCache) put(dir string, fd int) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.fds[dir]; ok {
		unix.Close(old)
	} else if len(c.fds) >= dirCacheMax {
		for k, v := range c.fds {
			unix.Close(v)
			delete(c.fds, k)
		}
	}
	c.fds[dir] = nfd
}

// walk opens the parent directory of path component by component, never
// following a symlink.
func (d *Dir) walk(op, p string) (parent, error) {
	el, err := split(op, p)
	if err != nil {
		return parent{}, err
	}
	if len(el) == 0 {
		fd, err := d.rootFD()
		if err != nil {
			return parent{}, wrap(op, p, err)
		}
		return parent{fd: fd, name: "."}, nil
	}
	// Start from the deepest cached ancestor of the parent.
	fd, i := -1, len(el)-1
	for ; i > 0; i-- {
		if fd = d.cache.get(joinEl(el[:i])); fd >= 0 {
			break
		}
	}
	if fd < 0 {
		if fd, err = d.rootFD(); err != nil {
			return parent{}, wrap(op, p, err)
		}
	}
	for ; i < len(el)-1; i++ {
		e := el[i]
		nfd, err := unix.Openat(fd, e, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if err == unix.ENOTDIR || err == unix.ELOOP {
				if unix.Fstatat(fd, e, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					if st.Mode&unix.S_IFMT == unix.S_IFLNK {
						err = fmt.Errorf("%w (at %q)", sink.ErrSymlinkInPath, joinEl(el[:i+1]))
					} else {
						err = errNotDir
					}
				}
			}
			unix.Close(fd)
			return parent{}, wrap(op, p, err)
		}
		unix.Close(fd)
		fd = nfd
		d.cache.put(joinEl(el[:i+1]), fd)
	}
	return parent{fd: fd, name: el[len(el)-1]}, nil
}

// rootFD returns an O_PATH fd of the root, from the cache when it can.
func (d *Dir) rootFD() (int, error) {
	if fd := d.cache.get("."); fd >= 0 {
		return fd, nil
	}
	fd, err := unix.Open(d.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	d.cache.put(".", fd)
	return fd, nil
}

func joinEl(el []string) string {
	s := el[0]
	for _, e := range el[1:] {
		s += "/" + e
	}
	return s
}

// lstat returns the entry's type, or 0 if it does not exist.
func (pp parent) lstat() (unix.Stat_t, uint32, error) {
	var st unix.Stat_t
	err := unix.Fstatat(pp.fd, pp.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return st, 0, nil
	}
	return st, st.Mode & unix.S_IFMT, err
}

// create runs mk, which makes a new non-directory at pp; if something is
// there already, clear makes room (or refuses a directory) and mk runs again.
func (pp parent) create(op, p string, mk func() error) error {
	if pp.name == "." {
		return pp.clear(op, p)
	}
	err := mk()
	if err != unix.EEXIST {
		return wrap(op, p, err)
	}
	if err := pp.clear(op, p); err != nil {
		return err
	}
	return wrap(op, p, mk())
}

// clear makes room for a new non-directory: an existing non-directory is
// removed, a directory is an error.
func (pp parent) clear(op, p string) error {
	if pp.name == "." {
		return wrap(op, p, fmt.Errorf("%w: is the root directory", fs.ErrExist))
	}
	_, typ, err := pp.lstat()
	switch {
	case err != nil:
		return wrap(op, p, err)
	case typ == unix.S_IFDIR:
		return wrap(op, p, fmt.Errorf("%w: is a directory", fs.ErrExist))
	case typ != 0:
		return wrap(op, p, unix.Unlinkat(pp.fd, pp.name, 0))
	}
	return nil
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

func timespecs(h *sink.Header) []unix.Timespec {
	return []unix.Timespec{timespec(h.Atime), timespec(h.Mtime)}
}

// setMeta applies owner, mode, xattrs and times to the entry, in that order:
// chown clears setuid bits and security.capability, and every change but
// utimensat itself leaves mtime alone. replaceXattrs removes xattrs h lacks
// (Mkdir over an existing directory).
func (pp parent) setMeta(op string, h *sink.Header, replaceXattrs bool) error {
	typ := h.Type()
	if err := unix.Fchownat(pp.fd, pp.name, int(h.UID), int(h.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return wrap(op, h.Path, fmt.Errorf("chown %d:%d: %w", h.UID, h.GID, err))
	}
	perm := h.Mode & sink.ModePerm
	chmod := func(m uint32) error {
		if typ == sink.TypeSymlink { // Linux symlinks have no permission bits
			return nil
		}
		if err := unix.Fchmodat(pp.fd, pp.name, m, 0); err != nil {
			return wrap(op, h.Path, fmt.Errorf("chmod %04o: %w", m, err))
		}
		return nil
	}
	// Without CAP_FOWNER, user.* xattrs need write permission: set them
	// while the owner may write, then apply the exact mode.
	xattrs := len(h.Xattrs) > 0 || replaceXattrs
	if xattrs && perm&0o200 == 0 {
		if err := chmod(perm | 0o200); err != nil {
			return err
		}
	} else if err := chmod(perm); err != nil {
		return err
	}
	if xattrs {
		if err := pp.setXattrs(h.Xattrs, replaceXattrs); err != nil {
			return wrap(op, h.Path, err)
		}
		if perm&0o200 == 0 {
			if err := chmod(perm); err != nil {
				return err
			}
		}
	}
	if err := unix.UtimesNanoAt(pp.fd, pp.name, timespecs(h), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return wrap(op, h.Path, fmt.Errorf("utimensat: %w", err))
	}
	return nil
}

func (pp parent) setXattrs(x map[string][]byte, replace bool) error {
	path := pp.procPath()
	if replace {
		names, err := listXattrs(path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, ok := x[n]; !ok {
				if err := unix.Lremovexattr(path, n); err != nil {
					return fmt.Errorf("removexattr %s: %w", n, err)
				}
			}
		}
	}
	for _, n := range slices.Sorted(mapKeys(x)) {
		if err := unix.Lsetxattr(path, n, x[n], 0); err != nil {
			if err == unix.ENOSPC || err == unix.E2BIG || err == unix.ERANGE {
				// ext4 without ea_inode: the value does not fit one block.
				return fmt.Errorf("setxattr %s (%d bytes): %w: %w", n, len(x[n]), sink.ErrUnsupported, err)
			}
			return fmt.Errorf("setxattr %s (%d bytes): %w", n, len(x[n]), err)
		}
	}
	return nil
}

func mapKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func listXattrs(path string) ([]string, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Llistxattr(path, buf)
		if err == unix.ERANGE {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listxattr: %w", err)
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

func getXattrs(path string) (map[string][]byte, error) {
	names, err := listXattrs(path)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	x := make(map[string][]byte, len(names))
	for _, n := range names {
		buf := make([]byte, 256)
		for {
			sz, err := unix.Lgetxattr(path, n, buf)
			if err == unix.ERANGE {
				sz, err = unix.Lgetxattr(path, n, nil)
				if err != nil {
					return nil, fmt.Errorf("getxattr %s: %w", n, err)
				}
				buf = make([]byte, sz+1)
				continue
			}
			if err == unix.ENODATA {
				break // removed meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("getxattr %s: %w", n, err)
			}
			x[n] = bytes.Clone(buf[:sz])
			break
		}
	}
	return x, nil
}

// Mkdir implements sink.Sink.
func (d *Dir) Mkdir(h *sink.Header) error {
	if h.Type() != sink.TypeDir {
		return wrap("mkdir", h.Path, fmt.Errorf("%w: mode %o is not a directory", fs.ErrInvalid, h.Mode))
	}
	pp, err := d.walk("mkdir", h.Path)
	if err != nil {
		return err
	}
	defer pp.close()
	if pp.name != "." {
		// Create first, look only if something is there.
		err := unix.Mkdirat(pp.fd, pp.name, 0o700)
		if err == nil {
			return pp.setMeta("mkdir", h, false)
		}
		if err != unix.EEXIST {
			return wrap("mkdir", h.Path, err)
		}
	}
	_, typ, err := pp.lstat()
	if err != nil {
		return wrap("mkdir", h.Path, err)
	}
	if typ == unix.S_IFDIR {
		return pp.setMeta("mkdir", h, true)
	}
	if typ != 0 {
		if err := unix.Unlinkat(pp.fd, pp.name, 0); err != nil {
			return wrap("mkdir", h.Path, err)
		}
	}
	if err := unix.Mkdirat(pp.fd, pp.name, 0o700); err != nil {
		return wrap("mkdir", h.Path, err)
	}
	return pp.setMeta("mkdir", h, false)
}

// WriteFile implements sink.Sink. All-zero 4 KiB blocks become holes.
func (d *Dir) WriteFile(h *sink.Header, r io.Reader) error {
	if h.Type() != sink.TypeReg || h.Size < 0 {
		return wrap("writefile", h.Path, fmt.Errorf("%w: mode %o size %d is not a regular file", fs.ErrInvalid, h.Mode, h.Size))
	}
	pp, err := d.walk("writefile", h.Path)
	if err != nil {
		return err
	}
	defer pp.close()
	var fd int
	err = pp.create("writefile", h.Path, func() (err error) {
		fd, err = unix.Openat(pp.fd, pp.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), h.Path)
	err = writeSparse(f, r, h.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(pp.fd, pp.name, 0)
		return wrap("writefile", h.Path, err)
	}
	return pp.setMeta("writefile", h, false)
}

const holeBlock = 4096

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// writeSparse copies exactly size bytes from r to f, seeking over all-zero
// blocks so they stay holes; a *sink.Sparse of that size is written region
// by region, its holes never read.
func writeSparse(f *os.File, r io.Reader, size int64) error {
	if sp, ok := r.(*sink.Sparse); ok && sp.Size() == size {
		if err := sp.WriteRegions(func(off int64, r io.Reader, n int64) error {
			return writeRange(f, r, off, off+n, size)
		}); err != nil {
			return err
		}
	} else if err := writeRange(f, r, 0, size, size); err != nil {
		return err
	}
	return f.Truncate(size)
}

// writeRange copies bytes start to end of the file (of size bytes) from r
// to f, seeking over all-zero blocks.
func writeRange(f *os.File, r io.Reader, start, end, size int64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	off := start
	for off < end {
		n := int(min(int64(len(buf)), end-off))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading contents at byte %d of %d: %w", off, size, err)
		}
		for b := 0; b < n; {
			e := min(b+holeBlock, n)
			if isZero(buf[b:e]) {
				b = e
				continue
			}
			// Extend over following non-zero blocks to write once.
			for e < n && !isZero(buf[e:min(e+holeBlock, n)]) {
				e = min(e+holeBlock, n)
			}
			if _, err := f.WriteAt(buf[b:e], off+int64(b)); err != nil {
				return err
			}
			b = e
		}
		off += int64(n)
	}
	return nil
}

var zeroBlock [4096]byte

// isZero reports whether b (at most 4096 bytes) is all zeros; bytes.Equal
// runs at memory speed, which matters for multi-GiB sparse files.
func isZero(b []byte) bool {
	return bytes.Equal(b, zeroBlock[:len(b)])
}

// Symlink implements sink.Sink. Linux symlinks have no permission bits of
// their own, so h's are not kept (Lstat reports 0777).
func (d *Dir) Symlink(h *sink.Header) error {
	if h.Type() != sink.TypeSymlink || h.Linkname == "" {
		return wrap("symlink", h.Path, fmt.Errorf("%w: not a symlink or empty target", fs.ErrInvalid))
	}
	pp, err := d.walk("symlink", h.Path)
	if err != nil {
		return err
	}
	defer pp.close()
	if err := pp.create("symlink", h.Path, func() error {
		return unix.Symlinkat(h.Linkname, pp.fd, pp.name)
	}); err != nil {
		return err
	}
	return pp.setMeta("symlink", h, false)
}

// Mknod implements sink.Sink.
func (d *Dir) Mknod(h *sink.Header) error {
	var dev uint64
	switch h.Type() {
	case sink.TypeChar, sink.TypeBlock:
		dev = unix.Mkdev(h.Devmajor, h.Devminor)
	case sink.TypeFifo, sink.TypeSocket:
	default:
		return wrap("mknod", h.Path, fmt.Errorf("%w: mode %o is not a device, fifo or socket", fs.ErrInvalid, h.Mode))
	}
	pp, err := d.walk("mknod", h.Path)
	if err != nil {
		return err
	}
	defer pp.close()
	if err := pp.create("mknod", h.Path, func() error {
		return unix.Mknodat(pp.fd, pp.name, h.Type()|0o600, int(dev))
	}); err != nil {
		return err
	}
	return pp.setMeta("mknod", h, false)
}

// Link implements sink.Sink; a link to a symlink links the symlink itself.
func (d *Dir) Link(oldname, newname string) error {
	op, err := d.walk("link", oldname)
	if err != nil {
		return err
	}
	defer op.close()
	ost, otyp, err := op.lstat()
	switch {
	case err != nil:
		return wrap("link", oldname, err)
	case otyp == 0:
		return wrap("link", oldname, fs.ErrNotExist)
	case otyp == unix.S_IFDIR:
		return wrap("link", oldname, fmt.Errorf("%w: hard link to a directory", fs.ErrInvalid))
	}
	np, err := d.walk("link", newname)
	if err != nil {
		return err
	}
	defer np.close()
	if nst, ntyp, err := np.lstat(); err == nil && ntyp != 0 && nst.Ino == ost.Ino && nst.Dev == ost.Dev {
		return nil
	}
	if err := np.clear("link", newname); err != nil {
		return err
	}
	return wrap("link", newname, unix.Linkat(op.fd, op.name, np.fd, np.name, 0))
}

// RemoveAll implements sink.Sink. Removing the root is refused.
func (d *Dir) RemoveAll(p string) error {
	pp, err := d.walk("removeall", p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
			return nil
		}
		return err
	}
	defer pp.close()
	if pp.name == "." {
		return wrap("removeall", p, fmt.Errorf("%w: cannot remove the root", fs.ErrInvalid))
	}
	d.cache.drop() // the cached directory may be under p
	return wrap("removeall", p, removeAt(pp.fd, pp.name))
}

func removeAt(dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dfd, name, 0)
	}
	// A read-only directory is still removed: it is going anyway.
	if st.Mode&0o700 != 0o700 {
		unix.Fchmodat(dfd, name, 0o700, 0)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeAt(fd, n); err != nil {
				return err
			}
		}
		if err == io.EOF || len(names) == 0 {
			break
		}
		if err != nil {
			return err
		}
	}
	return unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
}

// Lstat implements sink.Sink and sink.Source. Crtime is the birth time
// where the filesystem records one. Ino is the inode number, made distinct
// across the filesystems mounted below the root (devIndex).
func (d *Dir) Lstat(p string) (*sink.Header, error) {
	pp, err := d.walk("lstat", p)
	if err != nil {
		return nil, err
	}
	defer pp.close()
	var st unix.Statx_t
	if err := unix.Statx(pp.fd, pp.name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &st); err != nil {
		return nil, wrap("lstat", p, err)
	}
	ts := func(t unix.StatxTimestamp) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }
	h := &sink.Header{
		Path:  p,
		Mode:  uint32(st.Mode),
		UID:   st.Uid,
		GID:   st.Gid,
		Size:  int64(st.Size),
		Atime: ts(st.Atime),
		Mtime: ts(st.Mtime),
		Ctime: ts(st.Ctime),
		Ino:   d.devs.ino(d.root, unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino),
		Nlink: st.Nlink,
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		h.Crtime = ts(st.Btime)
	}
	switch h.Type() {
	case sink.TypeChar, sink.TypeBlock:
		h.Devmajor, h.Devminor = st.Rdev_major, st.Rdev_minor
	case sink.TypeSymlink:
		// st_size is the target's length on most filesystems, 0 on some:
		// grow until the target fits.
		for size := max(int(st.Size)+1, 256); ; size *= 2 {
			buf := make([]byte, size)
			n, err := unix.Readlinkat(pp.fd, pp.name, buf)
			if err != nil {
				return nil, wrap("lstat", p, err)
			}
			if n < size {
				h.Linkname = string(buf[:n])
				break
			}
			if size > 1<<20 {
				return nil, wrap("lstat", p, fmt.Errorf("symlink target longer than 1 MiB"))
			}
		}
	}
	if h.Xattrs, err = getXattrs(pp.procPath()); err != nil {
		return nil, wrap("lstat", p, err)
	}
	return h, nil
}

// openDir opens the directory at p for reading, refusing a symlink.
func (d *Dir) openDir(op, p string) (*os.File, error) {
	pp, err := d.walk(op, p)
	if err != nil {
		return nil, err
	}
	defer pp.close()
	fd, err := unix.Openat(pp.fd, pp.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			err = fmt.Errorf("%w: is a symlink", errNotDir)
		}
		return nil, wrap(op, p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// ReadDir implements sink.Sink and sink.Source.
func (d *Dir) ReadDir(p string) ([]string, error) {
	f, err := d.openDir("readdir", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, wrap("readdir", p, err)
	}
	slices.Sort(names)
	return names, nil
}

// Open implements sink.Source; only regular files open.
func (d *Dir) Open(p string) (io.ReadCloser, error) {
	pp, err := d.walk("open", p)
	if err != nil {
		return nil, err
	}
	defer pp.close()
	// Check first: opening a device or fifo can block or have side effects.
	_, typ, err := pp.lstat()
	if err == nil && typ == 0 {
		err = fs.ErrNotExist
	}
	if err == nil && typ != unix.S_IFREG {
		err = fmt.Errorf("%w: not a regular file", fs.ErrInvalid)
	}
	if err != nil {
		return nil, wrap("open", p, err)
	}
	fd, err := unix.Openat(pp.fd, pp.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, wrap("open", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, wrap("open", p, fmt.Errorf("%w: not a regular file", fs.ErrInvalid))
	}
	return os.NewFile(uintptr(fd), p), nil
}

// devIndex makes Header.Ino identify an entry across the filesystems
// mounted below a Dir's root: two mounts each have their own inode 2, and
// a walker that took them for one directory (sink.DirSet) or one file
// (hard links) would stop or link wrongly. Entries on the root's device
// keep their inode number; those of the n-th other device met have n in
// the top byte mixed in.
type devIndex struct {
	mu   sync.Mutex
	root uint64 // the root's device, once known
	ids  map[uint64]uint64
}

func (x *devIndex) ino(root string, dev, ino uint64) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ids == nil {
		x.ids = map[uint64]uint64{}
		var st unix.Stat_t
		if err := unix.Stat(root, &st); err == nil {
			x.root = st.Dev
		} else {
			x.root = dev
		}
	}
	if dev == x.root {
		return ino
	}
	id, ok := x.ids[dev]
	if !ok {
		id = uint64(len(x.ids)+1) & 0xff
		x.ids[dev] = id
	}
	return ino ^ id<<56
}
