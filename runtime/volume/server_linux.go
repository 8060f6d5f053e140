package volume

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"sync"
	"sync/atomic"
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
	// noHostSync: the filesystem was opened with ext4lite's NoSync
	// (Mount.NoHostSync), for Stats.
	noHostSync bool
	ctr        counters
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

// Close trims, syncs and closes the filesystem: the journal is
// checkpointed and left empty, and the host file's free blocks (what the
// episode deleted, the journal's log) are punched out, so a volume
// stopped gracefully takes only the space its files use (FS.Trim; where
// the host cannot punch, nothing is zeroed). Safe to call more than once.
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	close(v.stop)
	if !v.readonly {
		if _, err := v.fs.Trim(); err != nil {
			_ = v.fs.Close()
			return err
		}
	}
	return v.fs.Close()
}

// Sync writes everything to the volume file and flushes it. A volume
// that nothing changed since its last successful sync is already on
// stable storage: Sync returns at once. That matters because sync(2) in
// the guest becomes one FSync per file the Sentry holds open (2,000 after
// an untar of 2,000 files), and a flush of a clean volume still commits a
// transaction and fsyncs the host file twice (~1.4 ms).
func (v *Volume) Sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return unix.EIO
	}
	if !v.dirty {
		v.ctr.syncsClean.Add(1)
		return nil
	}
	t := time.Now()
	err := v.fs.Sync()
	v.ctr.syncs.Add(1)
	v.ctr.syncNanos.Add(uint64(time.Since(t)))
	if err != nil {
		return err // still dirty: the next sync tries again
	}
	v.dirty = false
	return nil
}

// Conn implements lisafs.ConnectionImpl for one mount of a Volume.
type Conn struct {
	vol *Volume
	// MaxOpen bounds the control and open FDs the Sentry may hold on this
	// mount at once (0: DefaultMaxOpen): each costs the gofer memory, and
	// a guest that opens files by the hundred thousand would otherwise
	// grow it without bound. Past it, walks, creates and opens fail with
	// ENFILE.
	MaxOpen int64
	open    atomic.Int64
	// MaxDirents bounds the directory snapshots the open FDs of this
	// mount hold at once, in bytes (0: DefaultMaxDirents). Each open
	// directory lists itself at its first Getdents64 and keeps that list
	// until read to its end, rewound or closed; without a bound, a Sentry
	// that reads one entry from each of MaxOpen FDs of a large directory
	// would hold MaxOpen copies of it. Past it, Getdents64 fails with
	// ENOMEM until others are released.
	MaxDirents int64
	dirents    atomic.Int64
	// onUnmount runs once the mount's root FD and every other FD are
	// released (the Sentry unmounted, or the connection is gone): it
	// closes the volume. Not at the root's release alone: a Sentry may
	// release the root first, and the volume must outlive the FDs that
	// still hold inodes (an unlinked file is freed at its last release).
	onUnmount    func()
	rootOnce     sync.Once
	rootReleased atomic.Bool
	// mounted is set by the first Mount: the Sentry mounts a connection
	// once, and only that root FD may unmount the volume.
	mounted atomic.Bool
}

var _ lisafs.ConnectionImpl = (*Conn)(nil)

// DefaultMaxOpen is Conn.MaxOpen's default.
const DefaultMaxOpen = 1 << 16

// DefaultMaxDirents is Conn.MaxDirents's default: 128 MiB, a listing of
// about two million entries held at once.
const DefaultMaxDirents = 128 << 20

// charge takes n bytes of directory snapshot from the mount's budget;
// false (nothing taken) past MaxDirents.
func (c *Conn) charge(n int64) bool {
	max := c.MaxDirents
	if max <= 0 {
		max = DefaultMaxDirents
	}
	if c.dirents.Add(n) > max {
		c.dirents.Add(-n)
		return false
	}
	return true
}

// full tells whether another FD would pass MaxOpen.
func (c *Conn) full() bool { return c.fullFor(1) }

// fullFor tells whether n more FDs would pass MaxOpen.
func (c *Conn) fullFor(n int64) bool {
	max := c.MaxOpen
	if max <= 0 {
		max = DefaultMaxOpen
	}
	return c.open.Load()+n > max
}

// NewConn returns a connection implementation for vol; onUnmount (may be
// nil) runs once the Sentry has released the mount and every FD on it.
func NewConn(vol *Volume, onUnmount func()) *Conn {
	return &Conn{vol: vol, onUnmount: onUnmount}
}

// ConnectionOpts are the lisafs options a volume mount needs.
//
// The *OnDeleted options let the Sentry truncate, fallocate and reopen a
// file unlinked while open, as on the kernel's ext4 (pytest's capture
// files, any tempfile.TemporaryFile): without them lisafs answers EINVAL
// itself. They are safe here because every control FD holds an ext4lite
// reference (Ref in newChild), so an unlinked inode lives, readable and
// writable, on the orphan list until its last FD is released, and the
// server addresses it by inode number, never by a host path.
func ConnectionOpts(readonly bool) lisafs.ConnectionOpts {
	return lisafs.ConnectionOpts{
		Readonly:          readonly,
		WalkStatSupported: true,
		SetAttrOnDeleted:  true,
		AllocateOnDeleted: true,
		OpenOnDeleted:     true,
	}
}

// Mount implements lisafs.ConnectionImpl.Mount. Only the first Mount of a
// connection succeeds; another is EBUSY (lisafs would serve any number,
// and each root FD is outside MaxOpen and unmounts the volume when closed).
func (c *Conn) Mount(conn *lisafs.Connection, mountNode *lisafs.Node) (*lisafs.ControlFD, lisafs.Statx, int, error) {
	c.vol.ctr.count(lisafs.Mount)
	if c.mounted.Swap(true) {
		return nil, lisafs.Statx{}, -1, unix.EBUSY
	}
	st, err := c.stat(ext4lite.RootIno)
	if err != nil {
		return nil, lisafs.Statx{}, -1, err
	}
	c.vol.fs.Ref(ext4lite.RootIno)
	fd := &controlFD{c: c, root: true, ino: ext4lite.RootIno}
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
		lisafs.BindAt, // refused with EPERM: see BindAt
	}
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
		// Its blocks' size on the volume, as the kernel's ext4 reports it
		// (a big directory is many blocks; this said 4096 for all). ext4lite
		// lays a changed directory out when it syncs, so until then the
		// size is the last sync's, and at least a block.
		s.Size = max(uint64(h.Size), 4096)
	}
	s.Blocks = (s.Size + 511) / 512
	// Nlink is 0 only for a file unlinked while open (ext4lite keeps no
	// other inode without links reachable): fstat says 0 as on Linux, and
	// the Sentry refuses linkat(2) of it with ENOENT as Linux does.
	return s
}

func (c *Conn) stat(ino ext4lite.Ino) (lisafs.Statx, error) {
	h, err := c.vol.fs.Stat(ino)
	if err != nil {
		return lisafs.Statx{}, errno(err)
	}
	return statx(h), nil
}

// controlFD implements lisafs.ControlFDImpl over an ext4lite inode, which
// it holds a reference on (Ref) for its lifetime: an open file stays
// usable after its last name is gone, as POSIX wants, and a rename above
// it changes nothing.
type controlFD struct {
	lisafs.ControlFD
	c    *Conn
	ino  ext4lite.Ino
	root bool
}

var _ lisafs.ControlFDImpl = (*controlFD)(nil)

// newChild makes a ControlFD for name (inode ino) in fd's directory.
func (fd *controlFD) newChild(name string, ino ext4lite.Ino, mode uint32) *controlFD {
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
	fd.c.vol.fs.Ref(ino)
	fd.c.open.Add(1)
	cfd := &controlFD{c: fd.c, ino: ino}
	cfd.ControlFD.Init(fd.Conn(), child, linux.FileMode(mode), cfd)
	return cfd
}

func (fd *controlFD) FD() *lisafs.ControlFD { return &fd.ControlFD }

func (fd *controlFD) Close() {
	fd.c.vol.ctr.count(lisafs.Close)
	fd.c.vol.mu.Lock()
	if !fd.c.vol.closed {
		// The last reference to an unlinked inode frees it without
		// marking the volume dirty: on disk the inode stays on the orphan
		// list until the next flush, which is consistent (recovery
		// releases orphans) and promises the guest nothing less.
		_ = fd.c.vol.fs.Unref(fd.ino)
	}
	fd.c.vol.mu.Unlock()
	// Counted down after the Unref: the last release unmounts.
	if fd.root {
		fd.c.rootReleased.Store(true)
	} else {
		fd.c.open.Add(-1)
	}
	fd.c.maybeUnmount()
}

// maybeUnmount runs onUnmount once the root FD and all others are released.
func (c *Conn) maybeUnmount() {
	if c.onUnmount != nil && c.rootReleased.Load() && c.open.Load() == 0 {
		c.rootOnce.Do(c.onUnmount)
	}
}

func (fd *controlFD) lock() func() {
	fd.c.vol.mu.Lock()
	return fd.c.vol.mu.Unlock
}

func (fd *controlFD) wrote() { fd.c.vol.dirty = true }

func (fd *controlFD) Stat() (lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.FStat)
	defer fd.lock()()
	return fd.c.stat(fd.ino)
}

func (fd *controlFD) SetStat(req lisafs.SetStatReq) (uint32, error) {
	fd.c.vol.ctr.count(lisafs.SetStat)
	defer fd.lock()()
	v := fd.c.vol.fs
	var a ext4lite.SetAttr
	if req.Mask&unix.STATX_MODE != 0 {
		m := req.Mode & 0o7777
		a.Mode = &m
	}
	if req.Mask&unix.STATX_UID != 0 {
		u := uint32(req.UID)
		a.UID = &u
	}
	if req.Mask&unix.STATX_GID != 0 {
		g := uint32(req.GID)
		a.GID = &g
	}
	if req.Mask&unix.STATX_SIZE != 0 {
		sz := int64(req.Size)
		a.Size = &sz
	}
	if req.Mask&(unix.STATX_ATIME|unix.STATX_MTIME) != 0 {
		now := time.Now()
		if req.Mask&unix.STATX_ATIME != 0 && req.Atime.Nsec != linux.UTIME_OMIT {
			t := pickTime(req.Atime, now)
			a.Atime = &t
		}
		if req.Mask&unix.STATX_MTIME != 0 && req.Mtime.Nsec != linux.UTIME_OMIT {
			t := pickTime(req.Mtime, now)
			a.Mtime = &t
		}
	}
	fd.wrote()
	if err := v.SetAttrIno(fd.ino, a); err != nil {
		return req.Mask, errno(err)
	}
	return 0, nil
}

func pickTime(t linux.Timespec, now time.Time) time.Time {
	if t.Nsec == linux.UTIME_NOW {
		return now
	}
	return time.Unix(t.Sec, t.Nsec)
}

func (fd *controlFD) Walk(name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.Walk)
	defer fd.lock()()
	if fd.c.full() {
		return nil, lisafs.Statx{}, unix.ENFILE
	}
	ino, err := fd.c.vol.fs.Lookup(fd.ino, name)
	if err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	st, err := fd.c.stat(ino)
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return fd.newChild(name, ino, uint32(st.Mode)).FD(), st, nil
}

func (fd *controlFD) WalkStat(names lisafs.StringArray, record func(lisafs.Statx)) error {
	fd.c.vol.ctr.count(lisafs.WalkStat)
	defer fd.lock()()
	ino := fd.ino
	if len(names) > 0 && names[0] == "" {
		st, err := fd.c.stat(ino)
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
		next, err := fd.c.vol.fs.Lookup(ino, name)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return errno(err)
		}
		st, err := fd.c.stat(next)
		if err != nil {
			return err
		}
		record(st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			break
		}
		ino = next
	}
	return nil
}

func (fd *controlFD) Open(flags uint32) (*lisafs.OpenFD, int, error) {
	fd.c.vol.ctr.count(lisafs.OpenAt)
	defer fd.lock()()
	switch fd.FileType() {
	case unix.S_IFREG:
		if flags&unix.O_TRUNC != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY {
			zero := int64(0)
			fd.wrote()
			if err := fd.c.vol.fs.SetAttrIno(fd.ino, ext4lite.SetAttr{Size: &zero}); err != nil {
				return nil, -1, errno(err)
			}
		}
	case unix.S_IFDIR:
	default:
		return nil, -1, unix.EPERM // devices, fifos and sockets are not opened through a volume
	}
	if fd.c.full() {
		return nil, -1, unix.ENFILE
	}
	fd.c.open.Add(1)
	ofd := &openFD{cfd: fd}
	ofd.OpenFD.Init(fd.FD(), flags, ofd)
	return ofd.FD(), -1, nil
}

// create makes name in fd's directory from h, with the current time.
func (fd *controlFD) create(name string, h *sink.Header) (*controlFD, lisafs.Statx, error) {
	if fd.c.full() {
		return nil, lisafs.Statx{}, unix.ENFILE
	}
	// A setgid directory gives every new entry its group, and a new
	// directory its setgid bit too, as ext4's inode_init_owner does: the
	// Sentry applies the rule itself only to what open(O_CREAT) and mkdir
	// make, not to fifos, devices and symlinks.
	dirMode, _, dirGID, err := fd.c.vol.fs.ModeOwner(fd.ino)
	if err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	if dirMode&sink.ModeSetgid != 0 {
		h.GID = dirGID
		switch {
		case h.Mode&sink.TypeMask == sink.TypeDir:
			h.Mode |= sink.ModeSetgid
		case h.Mode&(sink.ModeSetgid|0o010) == sink.ModeSetgid|0o010 && h.UID != 0:
			// A group-executable setgid file of the directory's group, made
			// by a user who may not be in that group, would run with it:
			// Linux strips setgid then (mode_strip_sgid) unless the creator
			// is in the group or holds CAP_FSETID. The volume does not know
			// the creator's groups (the Sentry sends the directory's gid
			// and does not strip it), so only root keeps it.
			h.Mode &^= sink.ModeSetgid
		}
	}
	now := time.Now()
	h.Atime, h.Mtime, h.Ctime = now, now, now
	fd.wrote()
	ino, err := fd.c.vol.fs.CreateAt(fd.ino, name, h)
	if err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	st, err := fd.c.stat(ino)
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return fd.newChild(name, ino, uint32(st.Mode)), st, nil
}

// perm is a new inode's permission bits with setuid, setgid and sticky:
// linux.FileMode.Permissions keeps only 0777, and a file the guest creates
// with mode 04755 (or a directory with 01777) kept none of its special bits
// on a volume, where the kernel's ext4 keeps them all.
func perm(mode linux.FileMode) uint32 { return uint32(mode) & 0o7777 }

// out adapts create's result to the lisafs signature.
func out(c *controlFD, st lisafs.Statx, err error) (*lisafs.ControlFD, lisafs.Statx, error) {
	if err != nil {
		return nil, st, err
	}
	return c.FD(), st, nil
}

func (fd *controlFD) OpenCreate(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string, flags uint32) (*lisafs.ControlFD, lisafs.Statx, *lisafs.OpenFD, int, error) {
	fd.c.vol.ctr.count(lisafs.OpenCreateAt)
	defer fd.lock()()
	if fd.c.fullFor(2) { // the new file's control FD and its open FD
		return nil, lisafs.Statx{}, nil, -1, unix.ENFILE
	}
	cfd, st, err := fd.create(name, &sink.Header{Mode: sink.TypeReg | perm(mode), UID: uint32(uid), GID: uint32(gid)})
	if err != nil {
		return nil, lisafs.Statx{}, nil, -1, err
	}
	cfd.c.open.Add(1)
	ofd := &openFD{cfd: cfd}
	ofd.OpenFD.Init(cfd.FD(), flags, ofd)
	return cfd.FD(), st, ofd.FD(), -1, nil
}

func (fd *controlFD) Mkdir(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.MkdirAt)
	defer fd.lock()()
	return out(fd.create(name, &sink.Header{Mode: sink.TypeDir | perm(mode), UID: uint32(uid), GID: uint32(gid)}))
}

func (fd *controlFD) Mknod(mode linux.FileMode, uid lisafs.UID, gid lisafs.GID, name string, minor, major uint32) (*lisafs.ControlFD, lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.MknodAt)
	defer fd.lock()()
	typ := uint32(mode) & unix.S_IFMT
	switch typ {
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
	case 0, unix.S_IFREG:
		typ = sink.TypeReg
	default:
		return nil, lisafs.Statx{}, unix.EINVAL
	}
	return out(fd.create(name, &sink.Header{Mode: typ | perm(mode), UID: uint32(uid), GID: uint32(gid), Devmajor: major, Devminor: minor}))
}

func (fd *controlFD) Symlink(name, target string, uid lisafs.UID, gid lisafs.GID) (*lisafs.ControlFD, lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.SymlinkAt)
	defer fd.lock()()
	return out(fd.create(name, &sink.Header{Mode: sink.TypeSymlink | 0o777, UID: uint32(uid), GID: uint32(gid), Linkname: target}))
}

func (fd *controlFD) Link(dir lisafs.ControlFDImpl, name string) (*lisafs.ControlFD, lisafs.Statx, error) {
	fd.c.vol.ctr.count(lisafs.LinkAt)
	defer fd.lock()()
	d, ok := dir.(*controlFD)
	if !ok || d.c.vol != fd.c.vol {
		return nil, lisafs.Statx{}, unix.EXDEV
	}
	if fd.c.full() {
		return nil, lisafs.Statx{}, unix.ENFILE
	}
	fd.wrote()
	if err := fd.c.vol.fs.LinkAt(fd.ino, d.ino, name); err != nil {
		return nil, lisafs.Statx{}, errno(err)
	}
	st, err := fd.c.stat(fd.ino)
	if err != nil {
		return nil, lisafs.Statx{}, err
	}
	return d.newChild(name, fd.ino, uint32(st.Mode)).FD(), st, nil
}

func (fd *controlFD) StatFS() (lisafs.StatFS, error) {
	fd.c.vol.ctr.count(lisafs.FStatFS)
	defer fd.lock()()
	s := fd.c.vol.fs.StatFS()
	return lisafs.StatFS{
		Type:            linux.EXT_SUPER_MAGIC,
		BlockSize:       int64(s.BlockSize),
		Blocks:          s.Blocks,
		BlocksFree:      s.FreeBlocks,
		BlocksAvailable: s.FreeBlocks,
		Files:           s.Inodes,
		FilesFree:       s.FreeInodes,
		NameLength:      uint64(s.NameLen),
	}, nil
}

func (fd *controlFD) Readlink(getLinkBuf func(uint32) []byte) (uint16, error) {
	fd.c.vol.ctr.count(lisafs.ReadLinkAt)
	defer fd.lock()()
	t, err := fd.c.vol.fs.ReadlinkIno(fd.ino)
	if err != nil {
		return 0, errno(err)
	}
	buf := getLinkBuf(uint32(len(t)))
	return uint16(copy(buf, t)), nil
}

func (fd *controlFD) Connect(uint32) (int, error) {
	fd.c.vol.ctr.count(lisafs.Connect)
	return -1, unix.ECONNREFUSED
}

func (fd *controlFD) ConnectWithCreds(uint32, lisafs.UID, lisafs.GID) (int, error) {
	fd.c.vol.ctr.count(lisafs.ConnectWithCreds)
	return -1, unix.ECONNREFUSED
}

// BindAt refuses with EPERM, which tells the Sentry to keep the socket
// file in memory (a synthetic dentry, fsimpl/gofer MknodAt): bind(2) and
// connect(2) on a path in a volume then work between guest processes, as
// containerd's and buildkit's sockets need. A volume holds no host socket
// to hand out, and a socket file is meaningless once the episode ends, so
// none is written to the volume.
func (fd *controlFD) BindAt(string, uint32, linux.FileMode, lisafs.UID, lisafs.GID) (*lisafs.ControlFD, lisafs.Statx, *lisafs.BoundSocketFD, int, error) {
	fd.c.vol.ctr.count(lisafs.BindAt)
	return nil, lisafs.Statx{}, nil, -1, unix.EPERM
}

func (fd *controlFD) Unlink(name string, flags uint32) error {
	fd.c.vol.ctr.count(lisafs.UnlinkAt)
	defer fd.lock()()
	fd.wrote()
	return errno(fd.c.vol.fs.UnlinkAt(fd.ino, name, flags&unix.AT_REMOVEDIR != 0))
}

func (fd *controlFD) RenameAt(oldName string, newDir lisafs.ControlFDImpl, newName string) error {
	fd.c.vol.ctr.count(lisafs.RenameAt)
	return fd.renameAt2(oldName, newDir, newName, 0)
}

func (fd *controlFD) RenameAt2(oldName string, newDir lisafs.ControlFDImpl, newName string, flags uint32) error {
	fd.c.vol.ctr.count(lisafs.RenameAt2)
	return fd.renameAt2(oldName, newDir, newName, flags)
}

func (fd *controlFD) renameAt2(oldName string, newDir lisafs.ControlFDImpl, newName string, flags uint32) error {
	defer fd.lock()()
	d, ok := newDir.(*controlFD)
	if !ok || d.c.vol != fd.c.vol {
		return unix.EXDEV
	}
	var rf ext4lite.RenameFlags
	if flags&unix.RENAME_NOREPLACE != 0 {
		rf |= ext4lite.RenameNoReplace
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		rf |= ext4lite.RenameExchange
	}
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 || rf == ext4lite.RenameNoReplace|ext4lite.RenameExchange {
		return unix.EINVAL
	}
	fd.wrote()
	v := fd.c.vol.fs
	if rf == 0 && (fd.ino != d.ino || oldName != newName) {
		// Two names of one inode: POSIX has rename do nothing, but the
		// Sentry's gofer client moves its dentry over the other (the old
		// name is gone for the guest). Doing the same keeps the volume as
		// the guest saw it: a name it saw go would come back in the next
		// episode.
		from, err1 := v.Lookup(fd.ino, oldName)
		to, err2 := v.Lookup(d.ino, newName)
		if err1 == nil && err2 == nil && from == to {
			return errno(v.UnlinkAt(fd.ino, oldName, false))
		}
	}
	return errno(v.RenameAt(fd.ino, oldName, d.ino, newName, rf))
}

func (fd *controlFD) Renamed() {}

func (fd *controlFD) GetXattr(name string, size uint32, getValueBuf func(uint32) []byte) (uint16, error) {
	fd.c.vol.ctr.count(lisafs.FGetXattr)
	defer fd.lock()()
	val, err := fd.c.vol.fs.GetxattrIno(fd.ino, name)
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
	fd.c.vol.ctr.count(lisafs.FSetXattr)
	defer fd.lock()()
	v := fd.c.vol.fs
	if flags&(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
		_, err := v.GetxattrIno(fd.ino, name)
		switch {
		case flags&unix.XATTR_CREATE != 0 && err == nil:
			return unix.EEXIST
		case flags&unix.XATTR_REPLACE != 0 && err != nil:
			return unix.ENODATA
		}
	}
	fd.wrote()
	return errno(v.SetxattrIno(fd.ino, name, []byte(value)))
}

func (fd *controlFD) ListXattr(uint64) (lisafs.StringArray, error) {
	fd.c.vol.ctr.count(lisafs.FListXattr)
	defer fd.lock()()
	names, err := fd.c.vol.fs.ListxattrIno(fd.ino)
	if err != nil {
		return nil, errno(err)
	}
	return lisafs.StringArray(names), nil
}

func (fd *controlFD) RemoveXattr(name string) error {
	fd.c.vol.ctr.count(lisafs.FRemoveXattr)
	defer fd.lock()()
	fd.wrote()
	return errno(fd.c.vol.fs.RemovexattrIno(fd.ino, name))
}

// openFD implements lisafs.OpenFDImpl on its control FD's inode.
type openFD struct {
	lisafs.OpenFD
	cfd *controlFD

	// dirMu guards the directory snapshot and cursor: lisafs serves
	// requests on one FD in parallel (Getdents64 only read-locks the node),
	// and a Sentry may send two at once.
	dirMu   sync.Mutex
	dirents []lisafs.Dirent64 // directory snapshot, taken at offset 0; dropped once read to its end
	next    int
	listed  bool  // a snapshot was taken (dirents may since be dropped)
	charged int64 // bytes of dirents charged to the Conn's MaxDirents
}

var _ lisafs.OpenFDImpl = (*openFD)(nil)

func (fd *openFD) FD() *lisafs.OpenFD { return &fd.OpenFD }

func (fd *openFD) Close() {
	fd.cfd.c.vol.ctr.count(lisafs.Close)
	fd.dirMu.Lock()
	fd.dropDirents()
	fd.dirMu.Unlock()
	fd.cfd.c.open.Add(-1)
	fd.cfd.c.maybeUnmount()
}

func (fd *openFD) Stat() (lisafs.Statx, error) { return fd.cfd.Stat() } // counted there

func (fd *openFD) Sync() error {
	fd.cfd.c.vol.ctr.count(lisafs.FSync)
	if fd.cfd.c.vol.readonly {
		return nil
	}
	return errno(fd.cfd.c.vol.Sync())
}

func (fd *openFD) Write(buf []byte, off uint64) (uint64, error) {
	fd.cfd.c.vol.ctr.count(lisafs.PWrite)
	if fd.cfd.FileType() != unix.S_IFREG {
		return 0, unix.EBADF
	}
	defer fd.cfd.lock()()
	fd.cfd.wrote()
	n, err := fd.cfd.c.vol.fs.WriteAtIno(fd.cfd.ino, buf, int64(off))
	fd.cfd.c.vol.ctr.bytesWritten.Add(uint64(max(n, 0)))
	return uint64(n), errno(err)
}

func (fd *openFD) Read(buf []byte, off uint64) (uint64, error) {
	fd.cfd.c.vol.ctr.count(lisafs.PRead)
	if fd.cfd.FileType() != unix.S_IFREG {
		return 0, unix.EISDIR
	}
	defer fd.cfd.lock()()
	n, err := fd.cfd.c.vol.fs.ReadAtIno(fd.cfd.ino, buf, int64(off))
	fd.cfd.c.vol.ctr.bytesRead.Add(uint64(max(n, 0)))
	if err == io.EOF {
		err = nil
	}
	return uint64(n), errno(err)
}

func (fd *openFD) Allocate(mode, off, length uint64) error {
	fd.cfd.c.vol.ctr.count(lisafs.FAllocate)
	if fd.cfd.FileType() != unix.S_IFREG {
		return unix.EBADF
	}
	if mode&^uint64(unix.FALLOC_FL_KEEP_SIZE) != 0 {
		return unix.EOPNOTSUPP
	}
	defer fd.cfd.lock()()
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
		return nil
	}
	end, err := allocEnd(off, length)
	if err != nil {
		return err
	}
	h, err := fd.cfd.c.vol.fs.Stat(fd.cfd.ino)
	if err != nil {
		return errno(err)
	}
	if end > h.Size {
		fd.cfd.wrote()
		return errno(fd.cfd.c.vol.fs.SetAttrIno(fd.cfd.ino, ext4lite.SetAttr{Size: &end}))
	}
	return nil
}

// allocEnd is where an fallocate of length bytes at off ends: EFBIG past
// what an off_t holds (the guest chooses both: a sum that wraps must not
// become a small or negative size). A zero length (the Sentry refuses it
// before it gets here) ends at 0: nothing grows.
func allocEnd(off, length uint64) (int64, error) {
	if length == 0 {
		return 0, nil
	}
	if off > math.MaxInt64 || length > math.MaxInt64-off {
		return 0, unix.EFBIG
	}
	return int64(off + length), nil
}

func (fd *openFD) Flush() error {
	fd.cfd.c.vol.ctr.count(lisafs.Flush)
	return nil
}

// direntCost is the size of a linux_dirent64 for name (the budget unit of
// Getdent64's count).
func direntCost(name string) uint32 { return (19 + uint32(len(name)) + 1 + 7) &^ 7 }

// maxDirentsBytes bounds what one Getdent64 records, as lisafs marshals
// it, whatever count the Sentry asks for: the response must fit in one
// message, and lisafs's handler grows its buffer ten maximal dirents
// (2,800 bytes) at a time and slices past the message's end if asked to.
func maxDirentsBytes() uint32 { return lisafs.MaxMessageSize() - 4096 }

func (fd *openFD) Getdent64(count uint32, seek0 bool, record func(lisafs.Dirent64)) error {
	fd.cfd.c.vol.ctr.count(lisafs.Getdents64)
	if fd.cfd.FileType() != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	fd.dirMu.Lock()
	defer fd.dirMu.Unlock()
	if seek0 || !fd.listed {
		if err := fd.snapshot(); err != nil {
			return err
		}
	}
	var used, sent uint32
	for fd.next < len(fd.dirents) {
		d := fd.dirents[fd.next]
		c, size := direntCost(string(d.Name)), uint32(d.SizeBytes())
		if used > 0 && (used+c > count || sent+size > maxDirentsBytes()) {
			break
		}
		used += c
		sent += size
		fd.next++
		record(d)
	}
	if fd.next == len(fd.dirents) {
		fd.dropDirents() // read to its end: what follows is nothing, until a rewind
	}
	return nil
}

// direntBytes is what one snapshot entry holds in memory: a
// lisafs.Dirent64's fixed fields and string header (48 bytes on 64-bit),
// and the name.
func direntBytes(name string) int64 { return 48 + int64(len(name)) }

// dropDirents releases the snapshot and its charge (dirMu held).
func (fd *openFD) dropDirents() {
	fd.cfd.c.dirents.Add(-fd.charged)
	fd.dirents, fd.next, fd.charged = nil, 0, 0
}

// snapshot lists the directory from its start (dirMu held), charging the
// list to the mount's MaxDirents: ENOMEM past it.
func (fd *openFD) snapshot() error {
	fd.dropDirents()
	fd.listed = false // until this one is taken: a failed one is retried
	defer fd.cfd.lock()()
	ents, err := fd.cfd.c.vol.fs.Entries(fd.cfd.ino)
	if err != nil {
		return errno(err)
	}
	var cost int64
	for _, e := range ents {
		cost += direntBytes(e.Name)
	}
	if !fd.cfd.c.charge(cost) {
		return unix.ENOMEM
	}
	fd.charged, fd.listed = cost, true
	fd.dirents = make([]lisafs.Dirent64, 0, len(ents))
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue // the Sentry makes its own
		}
		fd.dirents = append(fd.dirents, lisafs.Dirent64{
			Ino:  primitiveU64(uint64(e.Ino)),
			Off:  primitiveU64(uint64(len(fd.dirents) + 1)),
			Type: primitiveU8(uint8(e.Type >> 12)),
			Name: lisafs.SizedString(e.Name),
		})
	}
	return nil
}

func (fd *openFD) Renamed() {}

// Freeze syncs everything to the volume file and calls fn with the
// volume's lock held, so that neither the periodic sync nor a request
// writes the file while fn runs (a reflink clone of the file taken in fn
// holds exactly the bytes the Sentry saw). The caller keeps the Sentry
// from sending requests meanwhile (a paused kernel whose filesystems were
// synced by gVisor's save: docs/runtime.md, "Checkpoint, restore, fork").
func (c *Conn) Freeze(fn func() error) error {
	v := c.vol
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return unix.EIO
	}
	if !v.readonly {
		v.dirty = false
		if err := v.fs.Sync(); err != nil {
			return err
		}
	}
	return fn()
}
