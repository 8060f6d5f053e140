package erofs

import (
	"fmt"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
)

// hostRoot is a directory AddDir read: its fd stays open until Close, so
// the regular files below it are opened beneath it when the image is
// written.
type hostRoot struct {
	path string
	fd   int
}

func (r *hostRoot) close() error { return unix.Close(r.fd) }

// hostFile is a regular file AddDir found; WriteTo reads its bytes.
type hostFile struct {
	root *hostRoot
	dir  string // its directory below root ("." for root itself), shared by siblings
	name string
	ino  uint64
	dev  uint64
}

func (f *hostFile) rel() string {
	if f.dir == "." {
		return f.name
	}
	return f.dir + "/" + f.name
}

func (f *hostFile) path() string { return f.root.path + "/" + f.rel() }

// dirCache keeps the directory of the last file a worker opened: files
// come in nid order, siblings together, so most opens are one openat of
// a name instead of a walk from the root (perf: path walks were the
// largest cost of opening).
type dirCache struct {
	root *hostRoot
	dir  string
	fd   int // -1: none, or the root's own
}

func newDirCache() *dirCache { return &dirCache{fd: -1} }

func (c *dirCache) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
	}
	c.root, c.dir, c.fd = nil, "", -1
}

// parent returns an fd of f's directory.
func (c *dirCache) parent(f *hostFile) (int, error) {
	if f.dir == "." {
		return f.root.fd, nil
	}
	if c.root == f.root && c.dir == f.dir {
		return c.fd, nil
	}
	c.close()
	fd, err := openBeneath(f.root.fd, f.dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: f.root.path + "/" + f.dir, Err: err}
	}
	c.root, c.dir, c.fd = f.root, f.dir, fd
	return fd, nil
}

// openBeneath opens rel below root's fd without following any symlink
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; component by component
// with O_NOFOLLOW where the kernel lacks openat2).
func openBeneath(root int, rel string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(root, rel, &how)
	if err != unix.ENOSYS && err != unix.EPERM {
		return fd, err
	}
	dir := root
	for {
		el, rest, more := cutSlash(rel)
		if !more {
			fd, err := unix.Openat(dir, el, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if dir != root {
				unix.Close(dir)
			}
			return fd, err
		}
		next, err := unix.Openat(dir, el, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir, rel = next, rest
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// hostFD is an open host file: a bare fd, since an *os.File costs an
// fcntl and a failing epoll_ctl per file (O_NONBLOCK) and buys nothing.
type hostFD struct {
	fd   int
	path string
	f    *hostFile // what the scan saw, for checks
	size int64     // its scanned size
}

// ReadAt implements io.ReaderAt.
func (h *hostFD) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		k, err := h.pread(p[n:], off+int64(n))
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, io.EOF
		}
		n += k
	}
	return n, nil
}

func (h *hostFD) pread(p []byte, off int64) (int, error) {
	for {
		k, err := unix.Pread(h.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: h.path, Err: err}
		}
		return k, nil
	}
}

// readWhole reads the whole file into p[:h.size] and checks it ends
// there: p holds one byte more, and the kernel is asked for it with the
// rest, so that a file of the scanned size costs one pread, no fstat. On
// Linux a regular file's read comes back short only at its end, so a
// read that stops at exactly h.size bytes is the end. Anything else (more
// bytes: it grew, or is a device now; an error such as ESPIPE: a fifo;
// fewer bytes: it shrank) is checked with fstat and reported as the
// change it was. What it does not see, as the fstat would: another
// regular file of exactly the scanned size renamed into its place; no
// check at open sees the file rewritten in place either, so both give the
// bytes the file holds when it is read.
func (h *hostFD) readWhole(p []byte) error {
	if int64(len(p)) != h.size+1 {
		panic("erofs: readWhole buffer is not size+1 bytes")
	}
	n := 0
	for {
		k, err := h.pread(p[n:], int64(n))
		if err != nil {
			return h.changed(err)
		}
		n += k
		switch {
		case int64(n) == h.size:
			return nil // short of the probe byte: the end, where scanned
		case n == len(p):
			return h.changed(fmt.Errorf("more than %d bytes", h.size))
		case k == 0:
			return h.changed(fmt.Errorf("shrank to %d bytes", n))
		}
	}
}

// changed is the error for a read that disagreed with the scan (why):
// an fstat says what the file is now.
func (h *hostFD) changed(why error) error {
	if err := h.f.check(h.fd, h.size); err != nil {
		return err
	}
	return fmt.Errorf("erofs: %s changed while the image was built (was a %d-byte file; read: %w): build again from a tree nothing writes to", h.path, h.size, why)
}

func (h *hostFD) Close() error { return unix.Close(h.fd) }

func (h *hostFD) Fd() uintptr  { return uintptr(h.fd) }
func (h *hostFD) Name() string { return h.path }

// open opens the file for reading (never following a symlink, never
// blocking, as a fifo's open would, never making a terminal its
// controlling one). With check, an fstat makes sure it is still the
// regular file of size bytes that was scanned; without, the caller reads
// it with readWhole, which checks where it ends instead. With a dirCache,
// f is opened from its directory's fd.
func (f *hostFile) open(size int64, dc *dirCache, check bool) (*hostFD, error) {
	const flags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
	var fd int
	var err error
	if dc == nil {
		fd, err = openBeneath(f.root.fd, f.rel(), flags)
	} else {
		var dfd int
		if dfd, err = dc.parent(f); err != nil {
			return nil, err
		}
		fd, err = unix.Openat(dfd, f.name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: f.path(), Err: err}
	}
	if check {
		if err := f.check(fd, size); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return &hostFD{fd, f.path(), f, size}, nil
}

// check fstats fd: nil if it is the regular file of size bytes the scan
// saw, else an error naming it that says what it is now.
func (f *hostFile) check(fd int, size int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: f.path(), Err: err}
	}
	var now string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		now = "now a " + sink.TypeName(st.Mode)
	case st.Ino != f.ino || uint64(st.Dev) != f.dev:
		now = "now another file"
	case st.Size != size:
		now = fmt.Sprintf("now %d bytes", st.Size)
	default:
		return nil
	}
	return fmt.Errorf("erofs: %s changed while the image was built (was a %d-byte file, %s): build again from a tree nothing writes to", f.path(), size, now)
}
