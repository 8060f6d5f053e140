package erofs

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
)

// AddDir adds the host directory tree at root to the builder's root, as
// sink.Copy from sink/hostdir would (modes, owners, nanosecond mtimes,
// xattrs, devices, fifos, sockets, symlinks never followed, hard links as
// one inode, the root's metadata on the image's root), but scanned by
// Options.Workers goroutines, and with regular files' bytes not spooled:
// WriteTo reads them from the host, so the tree must not change until
// then (a file that did is an error naming it). The builder keeps root
// open until Close.
func (b *Builder) AddDir(root string) error {
	if b.closed {
		return errBuilderClosed
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: root, Err: err}
	}
	r := &hostRoot{path: root, fd: fd}
	b.roots = append(b.roots, r)
	s := &dirScan{b: b, root: r, links: map[[2]uint64]string{}}
	s.more = sync.NewCond(&s.mu)
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: root, Err: err}
	}
	h := statHeader(".", &st)
	var xb []byte
	if h.Xattrs, err = readXattrs(fd, "", &xb); err != nil {
		return &fs.PathError{Op: "listxattr", Path: root, Err: err}
	}
	if err := b.Mkdir(h); err != nil {
		return err
	}
	start := len(b.report.Warnings)
	s.todo = []kid{{".", st.Ino, st.Dev_major, st.Dev_minor}}
	var wg sync.WaitGroup
	for range b.workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work()
		}()
	}
	wg.Wait()
	if w := b.report.Warnings[start:]; len(w) > 1 {
		// Scanned in parallel: keep the report in path order (a
		// hard-linked file's warning names whichever path came first).
		slices.Sort(w)
	}
	return s.err
}

// dirScan is one AddDir: Workers goroutines take directories from todo
// (a stack, so it stays about as long as the tree is deep times wide, a
// few words per directory, however large the tree).
type dirScan struct {
	b     *Builder
	root  *hostRoot
	mu    sync.Mutex           // the builder, links, err, todo and busy
	more  *sync.Cond           // todo grew, or the scan is over
	todo  []kid                // directories found, not yet read
	busy  int                  // workers reading a directory
	links map[[2]uint64]string // (dev, ino) → first path, for nlink > 1
	err   error
}

// work reads directories until none is left or one failed.
func (s *dirScan) work() {
	buf := make([]byte, direntBuf)
	s.mu.Lock()
	for {
		for len(s.todo) == 0 && s.busy > 0 && s.err == nil {
			s.more.Wait()
		}
		if len(s.todo) == 0 || s.err != nil {
			s.more.Broadcast() // over: wake the others to leave too
			s.mu.Unlock()
			return
		}
		k := s.todo[len(s.todo)-1]
		s.todo = s.todo[:len(s.todo)-1]
		s.busy++
		s.mu.Unlock()
		s.dir(k.rel, k.ino, k.major, k.minor, buf)
		s.mu.Lock()
		s.busy--
		if s.busy == 0 && len(s.todo) == 0 {
			s.more.Broadcast()
		}
	}
}

func (s *dirScan) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.more.Broadcast()
	s.mu.Unlock()
}

func (s *dirScan) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// scanned is one directory entry, read without the lock.
type scanned struct {
	h         *sink.Header
	dev       uint64
	dir, name string // h.Path split
}

// dir reads the directory rel (whose statx gave ino and dev) and adds its
// entries, with buf for getdents; subdirectories go to todo.
func (s *dirScan) dir(rel string, ino uint64, major, minor uint32, buf []byte) {
	if s.failed() {
		return
	}
	host := s.root.path
	if rel != "." {
		host += "/" + rel
	}
	var fd int
	var err error
	if rel == "." {
		fd, err = unix.Dup(s.root.fd)
	} else {
		fd, err = openBeneath(s.root.fd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		s.fail(&fs.PathError{Op: "open", Path: host, Err: err})
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != ino || uint64(st.Dev) != unix.Mkdev(major, minor) {
		s.fail(fmt.Errorf("erofs: directory %s changed while the image was built: build again from a tree nothing writes to", host))
		return
	}
	names, err := readNames(fd, buf)
	if err != nil {
		s.fail(&fs.PathError{Op: "readdir", Path: host, Err: err})
		return
	}
	ents := make([]scanned, 0, len(names))
	var kids []kid
	var xb []byte
	link := make([]byte, 4097)
	for _, name := range names {
		p := name
		if rel != "." {
			p = rel + "/" + name
		}
		var x unix.Statx_t
		if err := unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &x); err != nil {
			s.fail(&fs.PathError{Op: "stat", Path: host + "/" + name, Err: err})
			return
		}
		h := statHeader(p, &x)
		if h.Type() == sink.TypeSymlink {
			n, err := unix.Readlinkat(fd, name, link)
			if err != nil {
				s.fail(&fs.PathError{Op: "readlink", Path: host + "/" + name, Err: err})
				return
			}
			h.Linkname = string(link[:n])
		}
		if h.Xattrs, err = readXattrs(fd, name, &xb); err != nil {
			s.fail(&fs.PathError{Op: "listxattr", Path: host + "/" + name, Err: err})
			return
		}
		ents = append(ents, scanned{h, unix.Mkdev(x.Dev_major, x.Dev_minor), rel, name})
		if h.Type() == sink.TypeDir {
			kids = append(kids, kid{p, x.Ino, x.Dev_major, x.Dev_minor})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		if err = s.add(e); err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("%s: %w", s.root.path+"/"+e.h.Path, err)
			}
			s.more.Broadcast()
			return
		}
	}
	// Only now: each subdirectory is in the builder. A worker finds its
	// directory by path and checks it is the one statx saw here.
	s.todo = append(s.todo, kids...)
	if len(kids) > 0 {
		s.more.Broadcast()
	}
}

// direntBuf is a scan worker's getdents buffer: most directories are read
// in one call (and the one that says there is no more).
const direntBuf = 64 << 10

// readNames lists the directory fd's names but . and .. with getdents64
// into buf: on a bare fd, since an *os.File costs an fcntl per directory
// and reads 8 KiB at a time.
func readNames(fd int, buf []byte) ([]string, error) {
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

type kid struct {
	rel          string
	ino          uint64
	major, minor uint32
}

// add puts one entry into the builder; s.mu is held.
func (s *dirScan) add(e scanned) error {
	h, b := e.h, s.b
	if h.Type() != sink.TypeDir && h.Nlink > 1 {
		k := [2]uint64{e.dev, h.Ino}
		if first, ok := s.links[k]; ok {
			return b.Link(first, h.Path)
		}
		s.links[k] = h.Path
	}
	switch h.Type() {
	case sink.TypeDir:
		return b.Mkdir(h)
	case sink.TypeReg:
		return b.addHostFile(h, &hostFile{root: s.root, dir: e.dir, name: e.name, ino: h.Ino, dev: e.dev})
	case sink.TypeSymlink:
		return b.Symlink(h)
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
		return b.Mknod(h)
	}
	return fmt.Errorf("unknown file type %o: %w", h.Type(), sink.ErrUnsupported)
}

func statHeader(p string, st *unix.Statx_t) *sink.Header {
	ts := func(t unix.StatxTimestamp) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }
	h := &sink.Header{
		Path: p, Mode: uint32(st.Mode), UID: st.Uid, GID: st.Gid, Size: int64(st.Size),
		Atime: ts(st.Atime), Mtime: ts(st.Mtime), Ctime: ts(st.Ctime), Ino: st.Ino, Nlink: st.Nlink,
	}
	if t := h.Type(); t == sink.TypeChar || t == sink.TypeBlock {
		h.Devmajor, h.Devminor = st.Rdev_major, st.Rdev_minor
	}
	return h
}

// procFD names name in the directory fd for the xattr calls that have no
// *at form; the l* variants do not follow a final symlink.
func procFD(fd int, name string) string {
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	if name != "" {
		p += "/" + name
	}
	return p
}

// noListxattrat is set once the kernel lacks listxattrat (before 6.13).
var noListxattrat atomic.Bool

// listXattrs lists the xattr names of name in the directory dirfd (""
// for dirfd itself) into buf, not following a final symlink:
// listxattrat(2) where the kernel has it, since a /proc/self/fd path costs
// a procfs walk per entry, which profiles showed as the biggest single
// syscall cost of a scan.
func listXattrs(dirfd int, name string, buf []byte) (int, error) {
	if !noListxattrat.Load() {
		flags := unix.AT_SYMLINK_NOFOLLOW
		if name == "" {
			flags |= unix.AT_EMPTY_PATH
		}
		p, err := unix.BytePtrFromString(name)
		if err != nil {
			return 0, err
		}
		var bp unsafe.Pointer
		if len(buf) > 0 {
			bp = unsafe.Pointer(&buf[0])
		}
		n, _, errno := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags), uintptr(bp), uintptr(len(buf)), 0)
		if errno != unix.ENOSYS {
			if errno != 0 {
				return 0, errno
			}
			return int(n), nil
		}
		noListxattrat.Store(true)
	}
	return unix.Llistxattr(procFD(dirfd, name), buf)
}

// readXattrs reads every xattr of name in dirfd (not following a final
// symlink); buf is reused across calls.
func readXattrs(dirfd int, name string, buf *[]byte) (map[string][]byte, error) {
	if len(*buf) == 0 {
		*buf = make([]byte, 4096)
	}
	n, err := listXattrs(dirfd, name, *buf)
	for err == unix.ERANGE {
		size, serr := listXattrs(dirfd, name, nil)
		if serr != nil {
			return nil, serr
		}
		*buf = make([]byte, max(size, 2*len(*buf)))
		n, err = listXattrs(dirfd, name, *buf)
	}
	if err == unix.ENOTSUP || err == unix.EOPNOTSUPP || n == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Values are rare: through /proc for an entry, not following it; from
	// the fd itself for dirfd's own (an l* call on /proc/self/fd/N would
	// ask the magic link, which has none: the root's were lost).
	path := procFD(dirfd, name)
	get := func(attr string, v []byte) (int, error) {
		if name == "" {
			return unix.Fgetxattr(dirfd, attr, v)
		}
		return unix.Lgetxattr(path, attr, v)
	}
	names := bytes.Split((*buf)[:n], []byte{0})
	x := make(map[string][]byte, len(names))
	for _, nb := range names {
		if len(nb) == 0 {
			continue
		}
		name := string(nb)
		for {
			size, err := get(name, nil)
			if err == unix.ENODATA {
				break // removed meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("getxattr %s: %w", name, err)
			}
			v := make([]byte, size)
			got, err := get(name, v)
			if err == unix.ERANGE {
				continue // grew meanwhile
			}
			if err == unix.ENODATA {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("getxattr %s: %w", name, err)
			}
			x[name] = v[:got]
			break
		}
	}
	return x, nil
}
