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
		}
		if err := v.checkEmpty(dst); err != nil {
			return err
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

// RenameFlags select renameat2 behaviour.
type RenameFlags uint32

// Rename flags (as RENAME_NOREPLACE and RENAME_EXCHANGE).
const (
	RenameNoReplace RenameFlags = 1 << iota
	RenameExchange
)

// RenameAt moves oname in odir to nname in ndir, with rename(2)'s
// replacement rules, or as renameat2 with NoReplace or Exchange.
func (v *FS) RenameAt(odir Ino, oname string, ndir Ino, nname string, flags RenameFlags) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := checkName(nname); err != nil {
		return err
	}
	op, od, err := v.dirLocked(odir)
	if err != nil {
		return err
	}
	np, nd, err := v.dirLocked(ndir)
	if err != nil {
		return err
	}
	ode, ok := od.entries[oname]
	if !ok {
		return fs.ErrNotExist
	}
	nde, exists := nd.entries[nname]
	if flags&RenameNoReplace != 0 && exists {
		return fs.ErrExist
	}
	if flags&RenameExchange != 0 {
		if !exists {
			return fs.ErrNotExist
		}
		return v.exchange(op, od, oname, ode, np, nd, nname, nde)
	}
	return v.renameLocked(op, od, oname, np, nd, nname)
}

// exchange swaps two entries (RENAME_EXCHANGE).
func (v *FS) exchange(op *inode, od *dir, oname string, ode dirent, np *inode, nd *dir, nname string, nde dirent) error {
	a, err := v.getInode(ode.ino)
	if err != nil {
		return err
	}
	b, err := v.getInode(nde.ino)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		moved *inode
		into  *inode
	}{{a, np}, {b, op}} {
		if x.moved.isDir() && v.isAncestor(x.moved.ino, x.into.ino) {
			return errInvalid
		}
	}
	v.forgetPaths()
	od.entries[oname], nd.entries[nname] = nde, ode
	od.dirty, nd.dirty = true, true
	v.touch(op)
	v.touch(np)
	v.touchCtime(a)
	v.touchCtime(b)
	if op.ino != np.ino {
		for _, x := range []struct {
			moved    *inode
			from, to *inode
		}{{a, op, np}, {b, np, op}} {
			if !x.moved.isDir() {
				continue
			}
			md, err := v.loadDir(x.moved)
			if err != nil {
				return err
			}
			md.parent, md.dirty = x.to.ino, true
			decLinks(x.from)
			if err := v.incLinks(x.to); err != nil {
				return err
			}
		}
	}
	return nil
}

// isAncestor reports whether dir a is dir b or above it.
func (v *FS) isAncestor(a, b uint32) bool {
	for cur, n := b, uint32(0); n <= v.sb.InodesCount; n++ {
		if cur == a {
			return true
		}
		if cur == disk.RootIno {
			return false
		}
		in, err := v.getInode(cur)
		if err != nil {
			return false
		}
		d, err := v.loadDir(in)
		if err != nil {
			return false
		}
		cur = d.parent
	}
	return false
}
