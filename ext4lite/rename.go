package ext4lite

import (
	"io/fs"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// Rename moves oldpath to newpath, replacing a file there or an empty
// directory when both are directories (rename(2) semantics).
func (v *FS) Rename(oldpath, newpath string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	op, od, oname, err := v.parentOf(oldpath)
	if err != nil {
		return pathErr("rename", oldpath, err)
	}
	np, nd, nname, err := v.parentOf(newpath)
	if err != nil {
		return pathErr("rename", newpath, err)
	}
	if err := v.renameLocked(op, od, oname, np, nd, nname); err != nil {
		return pathErr("rename", oldpath, err)
	}
	return nil
}

// renameLocked moves oname in od to nname in nd with rename(2)'s rules.
func (v *FS) renameLocked(op *inode, od *dir, oname string, np *inode, nd *dir, nname string) error {
	ode, ok := od.entries[oname]
	if !ok {
		return fs.ErrNotExist
	}
	v.forgetPaths()
	src, err := v.getInode(ode.ino)
	if err != nil {
		return err
	}
	if src.isDir() && v.isAncestor(src.ino, np.ino) {
		return errInvalid // a directory cannot move below itself
	}
	if nde, ok := nd.entries[nname]; ok {
		if nde.ino == src.ino {
			return nil
		}
		dst, err := v.getInode(nde.ino)
		if err != nil {
			return err
		}
		switch {
		case dst.isDir() && !src.isDir():
			return errIsDir
		case !dst.isDir() && src.isDir():
			return errNotDir
		case dst.isDir():
			dd, err := v.loadDir(dst)
			if err != nil {
				return err
			}
			if len(dd.entries) > 0 {
				return errNotEmpty
			}
		}
		if err := v.unlink(np, nd, nname, dst); err != nil {
			return err
		}
	}
	delete(od.entries, oname)
	od.dirty = true
	v.touch(op)
	nd.entries[nname] = dirent{ino: src.ino, ft: disk.FileTypeOfMode(src.d.Mode)}
	nd.dirty = true
	v.touch(np)
	v.touchCtime(src)
	if src.isDir() && op.ino != np.ino {
		sd, err := v.loadDir(src)
		if err != nil {
			return err
		}
		sd.parent = np.ino
		sd.dirty = true
		decLinks(op)
		if err := v.incLinks(np); err != nil {
			return err
		}
	}
	return nil
}
