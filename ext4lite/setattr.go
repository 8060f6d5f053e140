package ext4lite

import (
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// touch sets a directory's mtime and ctime after its entries changed.
func (v *FS) touch(in *inode) {
	t := v.opts.now()
	in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(t)
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(t)
	in.dirty = true
}

func (v *FS) touchCtime(in *inode) {
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(v.opts.now())
	in.dirty = true
}

// SetAttr lists the attributes SetAttrIno changes; nil fields are kept.
type SetAttr struct {
	Mode         *uint32 // permission bits incl. setuid/setgid/sticky
	UID, GID     *uint32
	Size         *int64 // regular files: truncate or extend
	Atime, Mtime *time.Time
}

// SetAttrIno changes mode, owner, size and times (the inode face of
// Chmod, Chown, Chtimes and Truncate; all set attributes through setAttr).
func (v *FS) SetAttrIno(ino Ino, a SetAttr) error {
	return v.modifyIno(ino, func(in *inode) error { return v.setAttr(in, a) })
}

// setAttr changes what a names on in, the one implementation behind
// SetAttrIno, Chmod, Chown and Chtimes (v.mu held; the caller sets ctime).
func (v *FS) setAttr(in *inode, a SetAttr) error {
	if a.Size != nil {
		if in.fileType() != disk.ModeReg {
			if in.isDir() {
				return errIsDir
			}
			return errInvalid
		}
		if *a.Size < 0 {
			return errInvalid
		}
		if err := v.truncateData(in, uint64(*a.Size)); err != nil {
			return err
		}
		t := v.opts.now()
		in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(t)
	}
	if a.Mode != nil {
		in.d.Mode = uint16(in.fileType() | *a.Mode&sink.ModePerm)
	}
	if a.UID != nil || a.GID != nil {
		uid, gid := in.d.UID(), in.d.GID()
		if a.UID != nil {
			uid = *a.UID
		}
		if a.GID != nil {
			gid = *a.GID
		}
		in.d.SetOwner(uid, gid)
	}
	if a.Atime != nil {
		in.d.Atime, in.d.AtimeExtra = disk.EncodeTime(*a.Atime)
	}
	if a.Mtime != nil {
		in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(*a.Mtime)
	}
	return nil
}

// change runs fn on the inode resolve finds, under the lock, as one
// metadata change: beginOp before it, a new ctime after. modify (the path
// face) and modifyIno (the inode face) are change with their resolve.
func (v *FS) change(resolve func() (*inode, error), fn func(in *inode) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	in, err := resolve()
	if err != nil {
		return err
	}
	if err := fn(in); err != nil {
		return err
	}
	v.touchCtime(in)
	return nil
}

// modify runs fn on p's inode under the lock, for metadata changes; its
// errors are *fs.PathError naming op and p.
func (v *FS) modify(op, p string, fn func(in *inode) error) error {
	return v.change(func() (*inode, error) {
		in, err := v.lookup(p)
		if err != nil {
			return nil, pathErr(op, p, err)
		}
		return in, nil
	}, func(in *inode) error {
		if err := fn(in); err != nil {
			return pathErr(op, p, err)
		}
		return nil
	})
}

// modifyIno runs fn on inode ino under the lock, for metadata changes.
func (v *FS) modifyIno(ino Ino, fn func(in *inode) error) error {
	return v.change(func() (*inode, error) { return v.inoLocked(ino) }, fn)
}

// Chmod sets permission bits (incl. setuid, setgid, sticky).
func (v *FS) Chmod(p string, mode uint32) error {
	return v.modify("chmod", p, func(in *inode) error { return v.setAttr(in, SetAttr{Mode: &mode}) })
}

// Chown sets the owner.
func (v *FS) Chown(p string, uid, gid uint32) error {
	return v.modify("chown", p, func(in *inode) error { return v.setAttr(in, SetAttr{UID: &uid, GID: &gid}) })
}

// Chtimes sets access and modification times.
func (v *FS) Chtimes(p string, atime, mtime time.Time) error {
	return v.modify("chtimes", p, func(in *inode) error { return v.setAttr(in, SetAttr{Atime: &atime, Mtime: &mtime}) })
}
