package ext4lite

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// prepareCreate resolves p's parent and clears the way for a new entry of
// type typ: an existing non-directory is unlinked (replaced); an existing
// directory is returned as existing when typ is a directory, else refused.
func (v *FS) prepareCreate(p string, typ uint32) (pin *inode, d *dir, name string, existing *inode, err error) {
	pin, d, name, err = v.parentOf(p)
	if err != nil {
		return
	}
	de, ok := d.entries[name]
	if !ok {
		return
	}
	old, err := v.getInode(de.ino)
	if err != nil {
		return
	}
	if old.isDir() {
		if typ == disk.ModeDir {
			return pin, d, name, old, nil
		}
		return nil, nil, "", nil, errIsDir
	}
	err = v.unlink(pin, d, name, old)
	return
}

// applyHeader sets permissions, owner, times and xattrs from h.
func (v *FS) applyHeader(in *inode, h *sink.Header) error {
	in.d.Mode = uint16(in.fileType() | h.Mode&sink.ModePerm)
	in.d.SetOwner(h.UID, h.GID)
	epoch := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Unix(0, 0)
		}
		return t
	}
	v.setTimes(in, epoch(h.Atime), epoch(h.Mtime), epoch(h.Ctime), epoch(h.Crtime))
	return v.setAllXattrs(in, h.Xattrs)
}

// Mkdir creates a directory or updates an existing one's metadata
// (sink.Sink).
func (v *FS) Mkdir(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	if h.Path == "." {
		root, err := v.getInode(disk.RootIno)
		if err != nil {
			return err
		}
		return v.applyHeader(root, h)
	}
	pin, d, name, old, err := v.prepareCreate(h.Path, disk.ModeDir)
	if err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	if old != nil {
		return v.applyHeader(old, h)
	}
	in, err := v.create(pin, d, name, disk.ModeDir, h)
	if err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	return v.applyHeader(in, h)
}

// Mknod creates a device, fifo or socket (sink.Sink). A whiteout is a
// character device 0:0.
func (v *FS) Mknod(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("mknod", h.Path, err)
	}
	typ := h.Mode & sink.TypeMask
	switch typ {
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
	default:
		return pathErr("mknod", h.Path, errInvalid)
	}
	pin, d, name, _, err := v.prepareCreate(h.Path, typ)
	if err != nil {
		return pathErr("mknod", h.Path, err)
	}
	in, err := v.create(pin, d, name, typ, h)
	if err != nil {
		return pathErr("mknod", h.Path, err)
	}
	return v.applyHeader(in, h)
}

// create makes the new inode of type typ for h and links it as name in
// directory pin (d): the one place each type's first state is made, for
// the sink face (Mkdir, WriteFile, Symlink, Mknod) and the inode face
// (CreateAt) alike. A directory gets its "." and ".." (two links), a
// regular file an empty extent tree, a symlink its body (writeSymlink), a
// device its number. The mode's permission bits, owner and a time of now
// are set; the callers set the rest. If anything fails, the inode is
// released again: no half-made inode is left for the next flush to write.
func (v *FS) create(pin *inode, d *dir, name string, typ uint32, h *sink.Header) (*inode, error) {
	perm := h.Mode & sink.ModePerm
	if typ == disk.ModeSymlink {
		perm = 0o777 // as symlink(2): a link's own mode is never used
	}
	in, err := v.newInode(typ|perm, h.UID, h.GID, v.opts.now())
	if err != nil {
		return nil, err
	}
	in.d.LinksCount = 1
	switch typ {
	case disk.ModeReg:
		in.d.Flags |= disk.FlagExtents
		in.ext = &extentMap{dirty: true}
	case disk.ModeDir:
		in.d.LinksCount = 2
		in.d.Flags |= disk.FlagExtents
		in.ext = &extentMap{dirty: true}
		v.newDir(in.ino, pin.ino)
	case disk.ModeSymlink:
		err = v.writeSymlink(in, h.Linkname)
	case disk.ModeChar, disk.ModeBlock:
		encodeDev(in.d.Block[:], h.Devmajor, h.Devminor)
	}
	if err == nil {
		err = v.link(pin, d, name, in)
	}
	if err != nil {
		if rerr := v.release(in); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	return in, nil
}

// encodeDev stores a device number in i_block as the kernel does: the old
// 16-bit encoding in word 0 when it fits, else the new one in word 1.
func encodeDev(b []byte, major, minor uint32) {
	clear(b[:12])
	if major < 256 && minor < 256 && (major != 0 || minor != 0) {
		binary.LittleEndian.PutUint32(b[0:], major<<8|minor)
		return
	}
	binary.LittleEndian.PutUint32(b[4:], minor&0xff|major<<8|(minor&^0xff)<<12)
}

func decodeDev(b []byte) (major, minor uint32) {
	if w := binary.LittleEndian.Uint32(b[0:]); w != 0 {
		return (w >> 8) & 0xff, w & 0xff
	}
	w := binary.LittleEndian.Uint32(b[4:])
	return (w & 0xfff00) >> 8, w&0xff | (w>>12)&0xfff00
}

// CreateAt makes a new entry name in dir from h (h.Path is ignored): an
// empty regular file, a directory, a symlink to h.Linkname, a device, fifo
// or socket. An existing name is fs.ErrExist.
func (v *FS) CreateAt(dir Ino, name string, h *sink.Header) (Ino, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return 0, err
	}
	if err := checkName(name); err != nil {
		return 0, err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return 0, err
	}
	pin, d, err := v.dirLocked(dir)
	if err != nil {
		return 0, err
	}
	if _, ok := d.entries[name]; ok {
		return 0, fs.ErrExist
	}
	typ := h.Mode & sink.TypeMask
	switch typ {
	case sink.TypeReg, sink.TypeDir, sink.TypeSymlink, sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
	default:
		return 0, errInvalid
	}
	if typ == sink.TypeSymlink && !v.validLinkname(h.Linkname) {
		return 0, errInvalid
	}
	in, err := v.create(pin, d, name, typ, h)
	if err != nil {
		return 0, err
	}
	now := v.opts.now()
	pick := func(t time.Time) time.Time {
		if t.IsZero() {
			return now
		}
		return t
	}
	v.setTimes(in, pick(h.Atime), pick(h.Mtime), pick(h.Ctime), pick(h.Crtime))
	if len(h.Xattrs) > 0 {
		if err := v.setAllXattrs(in, h.Xattrs); err != nil {
			return 0, err
		}
	}
	return Ino(in.ino), nil
}
