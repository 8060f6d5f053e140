package ext4lite

import (
	"io/fs"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// unlink removes name from directory pin and drops child's link, freeing
// it when no link is left.
func (v *FS) unlink(pin *inode, d *dir, name string, child *inode) error {
	v.forgetPaths()
	delete(d.entries, name)
	d.dirty = true
	v.touch(pin)
	if child.isDir() {
		decLinks(pin)
		child.d.LinksCount = 0
		return v.release(child)
	}
	decLinks(child)
	v.touchCtime(child)
	if child.d.LinksCount == 0 {
		return v.release(child)
	}
	return nil
}

// checkEmpty is errNotEmpty for a directory with entries, nil for an empty
// one or a non-directory: what Remove, UnlinkAt and a rename over a
// directory ask before the name goes.
func (v *FS) checkEmpty(in *inode) error {
	if !in.isDir() {
		return nil
	}
	d, err := v.loadDir(in)
	if err != nil {
		return err
	}
	if len(d.entries) > 0 {
		return errNotEmpty
	}
	return nil
}

// release frees an inode with no links: data, extent tree, xattr block and
// the inode itself.
func (v *FS) release(in *inode) error {
	if v.refs[in.ino] > 0 && !in.orphan {
		// Still open: keep it, on the orphan list, until the last Unref.
		in.orphan = true
		v.addOrphan(in)
		delete(v.dirs, in.ino)
		return nil
	}
	if usesBlockData(in) {
		m, err := v.loadExtents(in)
		if err != nil {
			return err
		}
		for _, r := range m.truncate(0) {
			if err := v.freeBlocks(r[0], r[1]); err != nil {
				return err
			}
		}
		for _, b := range m.tree {
			if err := v.freeBlocks(b, 1); err != nil {
				return err
			}
		}
		m.tree = nil
	}
	if err := v.releaseXattrBlock(in); err != nil {
		return err
	}
	// Attributes set but never flushed die with the inode: the next flush
	// must not store them (it would allocate a block nothing owns).
	in.xattrs, in.xattrsOK, in.xattrDirt = nil, true, false
	if err := v.freeInode(in.ino, in.isDir()); err != nil {
		return err
	}
	in.d.LinksCount = 0
	in.d.Dtime, _ = disk.EncodeTime(v.opts.now())
	in.d.SetSize(0)
	in.d.SetBlocks(0)
	in.d.SetFileACL(0)
	clear(in.d.Block[:])
	if in.d.Flags&disk.FlagExtents != 0 {
		disk.ExtentHeader{Magic: disk.ExtentMagic, Max: disk.ExtentsInInode}.EncodeInto(in.d.Block[:])
	}
	in.dirty = true // written (deleted) at the next flush, unless reused first
	delete(v.dirs, in.ino)
	return nil
}

// Remove removes a file or an empty directory.
func (v *FS) Remove(p string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	pin, d, name, err := v.parentOf(p)
	if err != nil {
		return pathErr("remove", p, err)
	}
	de, ok := d.entries[name]
	if !ok {
		return pathErr("remove", p, fs.ErrNotExist)
	}
	in, err := v.getInode(de.ino)
	if err != nil {
		return err
	}
	if err := v.checkEmpty(in); err != nil {
		return pathErr("remove", p, err)
	}
	return v.unlink(pin, d, name, in)
}

// RemoveAll removes p and everything below it; a missing p is not an
// error (sink.Sink).
func (v *FS) RemoveAll(p string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if p == "." {
		return pathErr("removeall", p, errInvalid)
	}
	pin, d, name, err := v.parentOf(p)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return pathErr("removeall", p, err)
	}
	de, ok := d.entries[name]
	if !ok {
		return nil
	}
	in, err := v.getInode(de.ino)
	if err != nil {
		return err
	}
	seen := map[uint32]bool{}
	if err := v.ownSubdir(pin, in, p, seen); err != nil {
		return pathErr("removeall", p, err)
	}
	if err := v.removeTree(in, p, seen); err != nil {
		return pathErr("removeall", p, err)
	}
	return v.unlink(pin, d, name, in)
}

// removeTree empties directory in (at path p) recursively. It enters only
// directories ownSubdir accepts, so it stays in in's own subtree and frees
// each directory once.
func (v *FS) removeTree(in *inode, p string, seen map[uint32]bool) error {
	if !in.isDir() {
		return nil
	}
	d, err := v.loadDir(in)
	if err != nil {
		return err
	}
	for _, name := range d.sortedNames() {
		c, err := v.getInode(d.entries[name].ino)
		if err != nil {
			return err
		}
		cp := p + "/" + name
		if err := v.ownSubdir(in, c, cp, seen); err != nil {
			return err
		}
		if err := v.removeTree(c, cp, seen); err != nil {
			return err
		}
		if err := v.unlink(in, d, name, c); err != nil {
			return err
		}
	}
	return nil
}

// ownSubdir checks that c, named at path p in directory pin, is pin's own
// subdirectory (its ".." is pin) met for the first time (seen), or not a
// directory. ext4 gives a directory one parent; a second name for one (a
// hard link to a directory, which only a crafted volume has: debugfs's
// link can make a/b/up the directory a) would send a recursive removal
// round a cycle forever, out of the tree it was asked to remove, or free
// the directory twice. Such a name is an error wrapping ErrCorrupt that
// names the path and the inode. (A directory named twice in one directory
// passes the '..' test: the removal stops at its second name, after the
// first one's subtree is gone.)
func (v *FS) ownSubdir(pin, c *inode, p string, seen map[uint32]bool) error {
	if !c.isDir() {
		return nil
	}
	if c.ino == disk.RootIno {
		return corruptf(-1, c.ino, "%q is a second name for the root directory (a hard link to a directory): not removed; gvx-vol fsck reports it", p)
	}
	if seen[c.ino] {
		// Named twice in one directory: its '..' cannot tell.
		return corruptf(-1, c.ino, "%q is a second name for directory %d, removed already (a hard link to a directory): not removed; gvx-vol fsck reports it", p, c.ino)
	}
	cd, err := v.loadDir(c)
	if err != nil {
		return err
	}
	if cd.parent != pin.ino {
		return corruptf(-1, c.ino, "%q is a second name for directory %d, whose '..' is directory %d (a hard link to a directory): not removed; gvx-vol fsck reports it", p, c.ino, cd.parent)
	}
	seen[c.ino] = true
	return nil
}

// UnlinkAt removes name from dir: a directory (which must be empty) when
// isDir, else a non-directory.
func (v *FS) UnlinkAt(dir Ino, name string, isDir bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	pin, d, err := v.dirLocked(dir)
	if err != nil {
		return err
	}
	de, ok := d.entries[name]
	if !ok {
		return fs.ErrNotExist
	}
	in, err := v.getInode(de.ino)
	if err != nil {
		return err
	}
	if in.isDir() != isDir {
		if isDir {
			return errNotDir
		}
		return errIsDir
	}
	if err := v.checkEmpty(in); err != nil {
		return err
	}
	return v.unlink(pin, d, name, in)
}
