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

// SetAttrIno changes mode, owner, size and times.
func (v *FS) SetAttrIno(ino Ino, a SetAttr) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	in, err := v.inoLocked(ino)
	if err != nil {
		return err
	}
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
	v.touchCtime(in)
	return nil
}

// modify runs fn on p's inode under the lock, for metadata changes.
func (v *FS) modify(op, p string, fn func(in *inode) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	in, err := v.lookup(p)
	if err != nil {
		return pathErr(op, p, err)
	}
	if err := fn(in); err != nil {
		return pathErr(op, p, err)
	}
	v.touchCtime(in)
	return nil
}

// Chmod sets permission bits (incl. setuid, setgid, sticky).
func (v *FS) Chmod(p string, mode uint32) error {
	return v.modify("chmod", p, func(in *inode) error {
		in.d.Mode = uint16(in.fileType() | mode&sink.ModePerm)
		return nil
	})
}

// Chown sets the owner.
func (v *FS) Chown(p string, uid, gid uint32) error {
	return v.modify("chown", p, func(in *inode) error {
		in.d.SetOwner(uid, gid)
		return nil
	})
}

// Chtimes sets access and modification times.
func (v *FS) Chtimes(p string, atime, mtime time.Time) error {
	return v.modify("chtimes", p, func(in *inode) error {
		in.d.Atime, in.d.AtimeExtra = disk.EncodeTime(atime)
		in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(mtime)
		return nil
	})
}
