package volume

import (
	"errors"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/lisafs"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// Volume is one ext4lite filesystem served over lisafs. Every operation
// takes mu: ext4lite serializes internally too, but compound operations
// (check then act) must be atomic with respect to each other.
type Volume struct {
	mu       sync.Mutex
	fs       *ext4lite.FS
	readonly bool
	closed   bool
	dirty    bool
	stop     chan struct{}
}

// NewVolume serves fs; it syncs fs every syncEvery while dirty (0: only on
// fsync and Close).
func NewVolume(v *ext4lite.FS, readonly bool, syncEvery time.Duration) *Volume {
	vol := &Volume{fs: v, readonly: readonly, stop: make(chan struct{})}
	if syncEvery > 0 && !readonly {
		go vol.syncLoop(syncEvery)
	}
	return vol
}

func (v *Volume) syncLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			v.mu.Lock()
			if v.dirty && !v.closed {
				if v.fs.Sync() == nil {
					v.dirty = false
				}
			}
			v.mu.Unlock()
		}
	}
}

// Close syncs and closes the filesystem. Safe to call more than once.
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	close(v.stop)
	return v.fs.Close()
}

// Sync writes everything to the volume file.
func (v *Volume) Sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return unix.EIO
	}
	v.dirty = false
	return v.fs.Sync()
}

// Conn implements lisafs.ConnectionImpl for one mount of a Volume.
type Conn struct {
	vol *Volume
	// mountPath is the server-tree path of the mount point: node paths
	// below it, minus this prefix, are volume paths.
	mountPath string
	// onUnmount runs when the mount's root FD is released (the sandbox
	// is gone): it closes the volume.
	onUnmount func()
	rootOnce  sync.Once
}

var _ lisafs.ConnectionImpl = (*Conn)(nil)

// NewConn returns a connection implementation for vol; onUnmount (may be
// nil) runs once the Sentry has released the mount.
func NewConn(vol *Volume, onUnmount func()) *Conn {
	return &Conn{vol: vol, onUnmount: onUnmount}
}

// ConnectionOpts are the lisafs options a volume mount needs.
func ConnectionOpts(readonly bool) lisafs.ConnectionOpts {
	return lisafs.ConnectionOpts{Readonly: readonly, WalkStatSupported: true}
}

// Mount implements lisafs.ConnectionImpl.Mount.
func (c *Conn) Mount(conn *lisafs.Connection, mountNode *lisafs.Node) (*lisafs.ControlFD, lisafs.Statx, int, error) {
	c.mountPath = mountNode.FilePath()
	st, err := c.stat(".")
	if err != nil {
		return nil, lisafs.Statx{}, -1, err
	}
	fd := &controlFD{c: c, root: true}
	mountNode.IncRef() // transferred to the ControlFD
	fd.ControlFD.Init(conn, mountNode, linux.FileMode(st.Mode), fd)
	return fd.FD(), st, -1, nil
}

// MaxMessageSize implements lisafs.ConnectionImpl.MaxMessageSize.
func (c *Conn) MaxMessageSize() uint32 { return lisafs.MaxMessageSize() }

// SupportedMessages implements lisafs.ConnectionImpl.SupportedMessages.
func (c *Conn) SupportedMessages() []lisafs.MID {
	return []lisafs.MID{
		lisafs.Mount, lisafs.Channel, lisafs.FStat, lisafs.SetStat, lisafs.Walk,
		lisafs.WalkStat, lisafs.OpenAt, lisafs.OpenCreateAt, lisafs.Close,
		lisafs.FSync, lisafs.PWrite, lisafs.PRead, lisafs.MkdirAt, lisafs.MknodAt,
		lisafs.SymlinkAt, lisafs.LinkAt, lisafs.FStatFS, lisafs.FAllocate,
		lisafs.ReadLinkAt, lisafs.UnlinkAt, lisafs.RenameAt, lisafs.Getdents64,
		lisafs.FGetXattr, lisafs.FSetXattr, lisafs.FListXattr, lisafs.FRemoveXattr,
		lisafs.RenameAt2,
	}
}

// volPath maps a server node to a volume path ("." for the mount root).
func (c *Conn) volPath(n *lisafs.Node) string {
	p := strings.TrimPrefix(n.FilePath(), c.mountPath)
	p = strings.Trim(p, "/")
	if p == "" {
		return "."
	}
	return p
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// errno turns ext4lite and os errors into the errno the Sentry expects.
func errno(err error) error {
	if err == nil {
		return nil
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.Errno(e)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return unix.ENOENT
	case errors.Is(err, fs.ErrExist):
		return unix.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return unix.EPERM
	case errors.Is(err, fs.ErrInvalid):
		return unix.EINVAL
	case errors.Is(err, ext4lite.ErrNoSpace):
		return unix.ENOSPC
	case errors.Is(err, ext4lite.ErrReadOnly):
		return unix.EROFS
	case errors.Is(err, ext4lite.ErrClosed):
		return unix.EIO
	case errors.Is(err, sink.ErrUnsupported), errors.Is(err, ext4lite.ErrUnsupported):
		return unix.EOPNOTSUPP
	}
	return unix.EIO
}

func ts(t time.Time) lisafs.StatxTimestamp {
	if t.IsZero() {
		return lisafs.StatxTimestamp{}
	}
	return lisafs.StatxTimestamp{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())}
}

// statx converts an ext4lite header.
func statx(h *sink.Header) lisafs.Statx {
	s := lisafs.Statx{
		Mask:      unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_NLINK | unix.STATX_UID | unix.STATX_GID | unix.STATX_INO | unix.STATX_SIZE | unix.STATX_BLOCKS | unix.STATX_ATIME | unix.STATX_MTIME | unix.STATX_CTIME,
		Blksize:   4096,
		Nlink:     h.Nlink,
		UID:       h.UID,
		GID:       h.GID,
		Mode:      uint16(h.Mode),
		Ino:       h.Ino,
		Atime:     ts(h.Atime),
		Mtime:     ts(h.Mtime),
		Ctime:     ts(h.Ctime),
		RdevMajor: h.Devmajor,
		RdevMinor: h.Devminor,
	}
	switch h.Type() {
	case sink.TypeReg:
		s.Size = uint64(h.Size)
	case sink.TypeSymlink:
		s.Size = uint64(len(h.Linkname))
	case sink.TypeDir:
		s.Size = 4096
	}
	s.Blocks = (s.Size + 511) / 512
	if s.Nlink == 0 {
		s.Nlink = 1
	}
	return s
}

func (c *Conn) stat(p string) (lisafs.Statx, error) {
	h, err := c.vol.fs.Lstat(p)
	if err != nil {
		return lisafs.Statx{}, errno(err)
	}
	return statx(h), nil
}

// controlFD implements lisafs.ControlFDImpl over a volume path.
type controlFD struct {
	lisafs.ControlFD
	c    *Conn
	root bool
}

var _ lisafs.ControlFDImpl = (*controlFD)(nil)

func (fd *controlFD) path() string { return fd.c.volPath(fd.Node()) }

// newChild makes a ControlFD for name in fd's directory.
func (fd *controlFD) newChild(name string, mode uint32) *controlFD {
	parent := fd.Node()
	var child *lisafs.Node
	parent.WithChildrenMu(func() {
		child = parent.LookupChildLocked(name)
		if child == nil {
			child = &lisafs.Node{}
			child.InitLocked(name, parent)
		} else {
			child.IncRef()
		}
	})
	cfd := &controlFD{c: fd.c}
	cfd.ControlFD.Init(fd.Conn(), child, linux.FileMode(mode), cfd)
	return cfd
}

func (fd *controlFD) FD() *lisafs.ControlFD { return &fd.ControlFD }

func (fd *controlFD) Close() {
	if fd.root && fd.c.onUnmount != nil {
		fd.c.rootOnce.Do(fd.c.onUnmount)
	}
}

func (fd *controlFD) lock() func() {
	fd.c.vol.mu.Lock()
	return fd.c.vol.mu.Unlock
}

func (fd *controlFD) wrote() { fd.c.vol.dirty = true }

func (fd *controlFD) Stat() (lisafs.Statx, error) {
	defer fd.lock()()
	return fd.c.stat(fd.path())
}

func (fd *controlFD) SetStat(req lisafs.SetStatReq) (uint32, error) {
	defer fd.lock()()
	v, p := fd.c.vol.fs, fd.path()
	var failed uint32
	var ferr error
	fail := func(bit uint32, err error) {
		if err != nil {
			failed |= bit
			ferr = errno(err)
		}
	}
	fd.wrote()
	if req.Mask&unix.STATX_MODE != 0 {
		fail(unix.STATX_MODE, v.Chmod(p, req.Mode&07777))
	}
	if req.Mask&(unix.STATX_UID|unix.STATX_GID) != 0 {
		h, err := v.Lstat(p)
		if err == nil {
			uid, gid := h.UID, h.GID
			if req.Mask&unix.STATX_UID != 0 {
				uid = uint32(req.UID)
			}
			if req.Mask&unix.STATX_GID != 0 {
				gid = uint32(req.GID)
			}
			err = v.Chown(p, uid, gid)
		}
		fail(req.Mask&(unix.STATX_UID|unix.STATX_GID), err)
	}
	if req.Mask&unix.STATX_SIZE != 0 {
		fail(unix.STATX_SIZE, v.Truncate(p, int64(req.Size)))
	}
	if req.Mask&(unix.STATX_ATIME|unix.STATX_MTIME) != 0 {
		h, err := v.Lstat(p)
		if err == nil {
			now := time.Now()
			at := pickTime(req.Mask&unix.STATX_ATIME != 0, req.Atime, h.Atime, now)
			mt := pickTime(req.Mask&unix.STATX_MTIME != 0, req.Mtime, h.Mtime, now)
			err = v.Chtimes(p, at, mt)
		}
		fail(req.Mask&(unix.STATX_ATIME|unix.STATX_MTIME), err)
	}
	return failed, ferr
}

func pickTime(set bool, t linux.Timespec, old, now time.Time) time.Time {
	switch {
	case !set || t.Nsec == linux.UTIME_OMIT:
		return old
	case t.Nsec == linux.UTIME_NOW:
		return now
	}
	return time.Unix(t.Sec, t.Nsec)
}

func (fd *controlFD) Walk(name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	defer fd.lock()()
	st, err := fd.c.stat(join(fd.path(), name))
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return fd.newChild(name, uint32(st.Mode)).FD(), st, nil
}

func (fd *controlFD) WalkStat(names lisafs.StringArray, record func(lisafs.Statx)) error {
	defer fd.lock()()
	p := fd.path()
	if len(names) > 0 && names[0] == "" {
		st, err := fd.c.stat(p)
		if err != nil {
			return err
		}
		record(st)
		names = names[1:]
	}
	if fd.IsSymlink() {
		return nil
	}
	for _, name := range names {
		p = join(p, name)
		st, err := fd.c.stat(p)
		if err == unix.ENOENT {
			break
		}
		if err != nil {
			return err
		}
		record(st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			break
		}
	}
	return nil
}

func (fd *controlFD) Open(flags uint32) (*lisafs.OpenFD, int, error) {
	defer fd.lock()()
	p := fd.path()
	ofd := &openFD{cfd: fd}
	switch fd.FileType() {
	case unix.S_IFREG:
		f, err := fd.c.vol.fs.OpenFile(p)
		if err != nil {
			return nil, -1, errno(err)
		}
		if flags&unix.O_TRUNC != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY {
			if err := f.Truncate(0); err != nil {
				return nil, -1, errno(err)
			}
			fd.wrote()
		}
		ofd.file = f
	case unix.S_IFDIR:
	default:
		return nil, -1, unix.EPERM // devices, fifos and sockets are not opened through a volume
	}
	ofd.OpenFD.Init(fd.FD(), flags, ofd)
	return ofd.FD(), -1, nil
}

func (fd *controlFD) create(name string, h *sink.Header, mk func(*sink.Header) error) (*controlFD, lisafs.Statx, error) {
	p := join(fd.path(), name)
	if _, err := fd.c.vol.fs.Lstat(p); err == nil {
		return nil, lisafs.Statx{}, unix.EEXIST
	}
	h.Path = p
	now := time.Now()
	h.Atime, h.Mtime, h.Ctime = now, now, now
	fd.wrote()
	if err := mk(h); err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	st, err := fd.c.stat(p)
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return fd.newChild(name, uint32(st.Mode)), st, nil
}

// out adapts create's result to the lisafs signature.
func out(c *controlFD, st lisafs.Statx, err error) (*lisafs.ControlFD, lisafs.Statx, error) {
	if err != nil {
		return nil, st, err
	}
	return c.FD(), st, nil
}

func (fd *controlFD) OpenCreate(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string, flags uint32) (*lisafs.ControlFD, lisafs.Statx, *lisafs.OpenFD, int, error) {
	defer fd.lock()()
	v := fd.c.vol.fs
	cfd, st, err := fd.create(name, &sink.Header{Mode: sink.TypeReg | uint32(mode.Permissions()), UID: uint32(uid), GID: uint32(gid)},
		func(h *sink.Header) error { return v.WriteFile(h, strings.NewReader("")) })
	if err != nil {
		return nil, lisafs.Statx{}, nil, -1, err
	}
	f, err := v.OpenFile(join(fd.path(), name))
	if err != nil {
		return nil, lisafs.Statx{}, nil, -1, errno(err)
	}
	ofd := &openFD{cfd: cfd, file: f}
	ofd.OpenFD.Init(cfd.FD(), flags, ofd)
	return cfd.FD(), st, ofd.FD(), -1, nil
}

func (fd *controlFD) Mkdir(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	defer fd.lock()()
	return out(fd.create(name, &sink.Header{Mode: sink.TypeDir | uint32(mode.Permissions()), UID: uint32(uid), GID: uint32(gid)}, fd.c.vol.fs.Mkdir))
}

func (fd *controlFD) Mknod(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string, minor, major uint32) (*lisafs.ControlFD, lisafs.Statx, error) {
	defer fd.lock()()
	typ := uint32(mode) & unix.S_IFMT
	switch typ {
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
	case 0, unix.S_IFREG:
		return out(fd.create(name, &sink.Header{Mode: sink.TypeReg | uint32(mode.Permissions()), UID: uint32(uid), GID: uint32(gid)},
			func(h *sink.Header) error { return fd.c.vol.fs.WriteFile(h, strings.NewReader("")) }))
	default:
		return nil, lisafs.Statx{}, unix.EINVAL
	}
	return out(fd.create(name, &sink.Header{Mode: typ | uint32(mode.Permissions()), UID: uint32(uid), GID: uint32(gid), Devmajor: major, Devminor: minor}, fd.c.vol.fs.Mknod))
}

func (fd *controlFD) Symlink(name, target string, uid lisafs.UID, gid lisafs.GID) (*lisafs.ControlFD, lisafs.Statx, error) {
	defer fd.lock()()
	return out(fd.create(name, &sink.Header{Mode: sink.TypeSymlink | 0o777, UID: uint32(uid), GID: uint32(gid), Linkname: target}, fd.c.vol.fs.Symlink))
}

func (fd *controlFD) Link(dir lisafs.ControlFDImpl, name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	defer fd.lock()()
	d, ok := dir.(*controlFD)
	if !ok || d.c.vol != fd.c.vol {
		return nil, lisafs.Statx{}, unix.EXDEV
	}
	np := join(d.path(), name)
	fd.wrote()
	if err := fd.c.vol.fs.Link(fd.path(), np); err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	st, err := fd.c.stat(np)
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return d.newChild(name, uint32(st.Mode)).FD(), st, nil
}

func (fd *controlFD) StatFS() (lisafs.StatFS, error) {
	defer fd.lock()()
	in, err := fd.c.vol.fs.Info()
	if err != nil {
		return lisafs.StatFS{}, errno(err)
	}
	return lisafs.StatFS{
		Type:            linux.EXT_SUPER_MAGIC,
		BlockSize:       int64(in.BlockSize),
		Blocks:          in.Blocks,
		BlocksFree:      in.FreeBlocks,
		BlocksAvailable: in.FreeBlocks,
		Files:           uint64(in.Inodes),
		FilesFree:       uint64(in.FreeInodes),
		NameLength:      255,
	}, nil
}

func (fd *controlFD) Readlink(getLinkBuf func(uint32) []byte) (uint16, error) {
	defer fd.lock()()
	t, err := fd.c.vol.fs.Readlink(fd.path())
	if err != nil {
		return 0, errno(err)
	}
	buf := getLinkBuf(uint32(len(t)))
	return uint16(copy(buf, t)), nil
}

func (fd *controlFD) Connect(uint32) (int, error) { return -1, unix.ECONNREFUSED }

func (fd *controlFD) ConnectWithCreds(uint32, lisafs.UID, lisafs.GID) (int, error) {
	return -1, unix.ECONNREFUSED
}

func (fd *controlFD) BindAt(string, uint32, linux.FileMode, lisafs.UID, lisafs.GID) (*lisafs.ControlFD, lisafs.Statx, *lisafs.BoundSocketFD, int, error) {
	return nil, lisafs.Statx{}, nil, -1, unix.EOPNOTSUPP
}

func (fd *controlFD) Unlink(name string, flags uint32) error {
	defer fd.lock()()
	p := join(fd.path(), name)
	h, err := fd.c.vol.fs.Lstat(p)
	if err != nil {
		return errno(err)
	}
	isDir := h.Type() == sink.TypeDir
	switch {
	case flags&unix.AT_REMOVEDIR != 0 && !isDir:
		return unix.ENOTDIR
	case flags&unix.AT_REMOVEDIR == 0 && isDir:
		return unix.EISDIR
	}
	fd.wrote()
	return errno(fd.c.vol.fs.Remove(p))
}

func (fd *controlFD) RenameAt(oldName string, newDir lisafs.ControlFDImpl, newName string) error {
	return fd.RenameAt2(oldName, newDir, newName, 0)
}

func (fd *controlFD) RenameAt2(oldName string, newDir lisafs.ControlFDImpl, newName string, flags uint32) error {
	defer fd.lock()()
	d, ok := newDir.(*controlFD)
	if !ok || d.c.vol != fd.c.vol {
		return unix.EXDEV
	}
	v := fd.c.vol.fs
	op, np := join(fd.path(), oldName), join(d.path(), newName)
	if _, err := v.Lstat(op); err != nil {
		return errno(err)
	}
	_, nerr := v.Lstat(np)
	fd.wrote()
	switch {
	case flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0,
		flags&unix.RENAME_NOREPLACE != 0 && flags&unix.RENAME_EXCHANGE != 0:
		return unix.EINVAL
	case flags&unix.RENAME_NOREPLACE != 0:
		if nerr == nil {
			return unix.EEXIST
		}
	case flags&unix.RENAME_EXCHANGE != 0:
		if nerr != nil {
			return errno(nerr)
		}
		// ext4lite's path API has no exchange: go through a free name in
		// the old directory (safe: the volume lock is held throughout).
		tmp := ""
		for i := 0; ; i++ {
			tmp = join(fd.path(), ".gvx-exchange-"+strings.Repeat("x", i))
			if _, err := v.Lstat(tmp); err != nil {
				break
			}
		}
		if err := v.Rename(op, tmp); err != nil {
			return errno(err)
		}
		if err := v.Rename(np, op); err != nil {
			_ = v.Rename(tmp, op)
			return errno(err)
		}
		return errno(v.Rename(tmp, np))
	}
	return errno(v.Rename(op, np))
}

func (fd *controlFD) Renamed() {}

func (fd *controlFD) GetXattr(name string, size uint32, getValueBuf func(uint32) []byte) (uint16, error) {
	defer fd.lock()()
	val, err := fd.c.vol.fs.Getxattr(fd.path(), name)
	if err != nil {
		return 0, errno(err)
	}
	if size != 0 && uint32(len(val)) > size {
		return 0, unix.ERANGE
	}
	buf := getValueBuf(uint32(len(val)))
	return uint16(copy(buf, val)), nil
}

func (fd *controlFD) SetXattr(name, value string, flags uint32) error {
	defer fd.lock()()
	v, p := fd.c.vol.fs, fd.path()
	if flags&(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
		_, err := v.Getxattr(p, name)
		switch {
		case flags&unix.XATTR_CREATE != 0 && err == nil:
			return unix.EEXIST
		case flags&unix.XATTR_REPLACE != 0 && err != nil:
			return unix.ENODATA
		}
	}
	fd.wrote()
	return errno(v.Setxattr(p, name, []byte(value)))
}

func (fd *controlFD) ListXattr(uint64) (lisafs.StringArray, error) {
	defer fd.lock()()
	names, err := fd.c.vol.fs.Listxattr(fd.path())
	if err != nil {
		return nil, errno(err)
	}
	return lisafs.StringArray(names), nil
}

func (fd *controlFD) RemoveXattr(name string) error {
	defer fd.lock()()
	fd.wrote()
	return errno(fd.c.vol.fs.Removexattr(fd.path(), name))
}

// openFD implements lisafs.OpenFDImpl: a regular file holds an ext4lite
// handle (valid across renames); a directory lists by path.
type openFD struct {
	lisafs.OpenFD
	cfd  *controlFD
	file *ext4lite.File

	dirents []lisafs.Dirent64 // directory snapshot, taken at offset 0
	next    int
}

var _ lisafs.OpenFDImpl = (*openFD)(nil)

func (fd *openFD) FD() *lisafs.OpenFD { return &fd.OpenFD }

func (fd *openFD) Close() {}

func (fd *openFD) Stat() (lisafs.Statx, error) { return fd.cfd.Stat() }

func (fd *openFD) Sync() error {
	if fd.cfd.c.vol.readonly {
		return nil
	}
	return errno(fd.cfd.c.vol.Sync())
}

func (fd *openFD) Write(buf []byte, off uint64) (uint64, error) {
	if fd.file == nil {
		return 0, unix.EBADF
	}
	defer fd.cfd.lock()()
	fd.cfd.wrote()
	n, err := fd.file.WriteAt(buf, int64(off))
	return uint64(n), errno(err)
}

func (fd *openFD) Read(buf []byte, off uint64) (uint64, error) {
	if fd.file == nil {
		return 0, unix.EISDIR
	}
	defer fd.cfd.lock()()
	n, err := fd.file.ReadAt(buf, int64(off))
	if err == io.EOF {
		err = nil
	}
	return uint64(n), errno(err)
}

func (fd *openFD) Allocate(mode, off, length uint64) error {
	if fd.file == nil {
		return unix.EBADF
	}
	if mode&^uint64(unix.FALLOC_FL_KEEP_SIZE) != 0 {
		return unix.EOPNOTSUPP
	}
	defer fd.cfd.lock()()
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
		return nil
	}
	if end := int64(off + length); end > fd.file.Size() {
		fd.cfd.wrote()
		return errno(fd.file.Truncate(end))
	}
	return nil
}

func (fd *openFD) Flush() error { return nil }

// direntCost is the size of a linux_dirent64 for name (the budget unit of
// Getdent64's count).
func direntCost(name string) uint32 { return (19 + uint32(len(name)) + 1 + 7) &^ 7 }

func (fd *openFD) Getdent64(count uint32, seek0 bool, record func(lisafs.Dirent64)) error {
	if fd.cfd.FileType() != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	if seek0 || fd.dirents == nil {
		if err := fd.snapshot(); err != nil {
			return err
		}
	}
	var used uint32
	for fd.next < len(fd.dirents) {
		d := fd.dirents[fd.next]
		c := direntCost(string(d.Name))
		if used+c > count && used > 0 {
			break
		}
		used += c
		fd.next++
		record(d)
	}
	return nil
}

func (fd *openFD) snapshot() error {
	defer fd.cfd.lock()()
	v, dir := fd.cfd.c.vol.fs, fd.cfd.path()
	names, err := v.ReadDir(dir)
	if err != nil {
		return errno(err)
	}
	sort.Strings(names)
	fd.dirents = fd.dirents[:0]
	fd.next = 0
	for i, name := range names {
		h, err := v.Lstat(join(dir, name))
		if err != nil {
			continue
		}
		fd.dirents = append(fd.dirents, lisafs.Dirent64{
			Ino:  primitiveU64(h.Ino),
			Off:  primitiveU64(uint64(i + 1)),
			Type: primitiveU8(uint8(h.Mode >> 12)),
			Name: lisafs.SizedString(name),
		})
	}
	if fd.dirents == nil {
		fd.dirents = []lisafs.Dirent64{}
	}
	return nil
}

func (fd *openFD) Renamed() {}
