package ext4lite

import (
	"errors"
	"io/fs"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// incLinks and decLinks keep i_links_count, with dir_nlink's rule that a
// directory past EXT4_LINK_MAX counts 1.
func (v *FS) incLinks(in *inode) error {
	if in.d.LinksCount >= disk.MaxLinks-1 {
		if in.isDir() && v.sb.FeatureROCompat&disk.ROCompatDirNlink != 0 {
			in.d.LinksCount = 1
			in.dirty = true
			return nil
		}
		return errTooMany
	}
	if !(in.isDir() && in.d.LinksCount == 1) {
		in.d.LinksCount++
	}
	in.dirty = true
	return nil
}

func decLinks(in *inode) {
	if in.isDir() && in.d.LinksCount == 1 {
		return // dir_nlink: "many"; stays 1
	}
	if in.d.LinksCount > 0 {
		in.d.LinksCount--
	}
	in.dirty = true
}

// link adds name → child to directory pin.
func (v *FS) link(pin *inode, d *dir, name string, child *inode) error {
	if len(name) > disk.MaxNameLen {
		return errTooLong
	}
	d.entries[name] = dirent{ino: child.ino, ft: disk.FileTypeOfMode(child.d.Mode)}
	d.dirty = true
	v.touch(pin)
	if child.isDir() {
		if err := v.incLinks(pin); err != nil {
			delete(d.entries, name)
			return err
		}
	}
	return nil
}

// Link makes newname a hard link to oldname (sink.Sink). It is LinkAt
// with the sink contract's one difference: a non-directory already at
// newname is replaced (as tar extraction and layer application need),
// where LinkAt, which is link(2), fails with fs.ErrExist. Both refuse a
// directory (fs.ErrPermission) and share the rest (addLink).
func (v *FS) Link(oldname, newname string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	old, err := v.lookup(oldname)
	if err != nil {
		return pathErr("link", oldname, err)
	}
	pin, d, name, err := v.parentOf(newname)
	if err != nil {
		return pathErr("link", newname, err)
	}
	if err := v.addLink(old, pin, d, name, true); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return pathErr("link", oldname, err)
		}
		return pathErr("link", newname, err)
	}
	return nil
}

// addLink gives the non-directory in the new name name in directory pin
// (d): what Link and LinkAt share. An existing name is replaced (a
// non-directory; a directory is errIsDir) with replace set, else
// fs.ErrExist; a name already pointing at in is left alone.
func (v *FS) addLink(in *inode, pin *inode, d *dir, name string, replace bool) error {
	if in.isDir() {
		return fs.ErrPermission
	}
	if in.d.LinksCount == 0 {
		return fs.ErrNotExist // linking an unlinked file back (linkat of O_TMPFILE) is not supported
	}
	if de, ok := d.entries[name]; ok {
		if !replace {
			return fs.ErrExist
		}
		if de.ino == in.ino {
			return nil
		}
		cur, err := v.getInode(de.ino)
		if err != nil {
			return err
		}
		if cur.isDir() {
			return errIsDir
		}
		if err := v.unlink(pin, d, name, cur); err != nil {
			return err
		}
	}
	if err := v.incLinks(in); err != nil {
		return err
	}
	v.touchCtime(in)
	return v.link(pin, d, name, in)
}

// LinkAt makes a new name for the non-directory ino, with link(2)'s
// semantics: an existing name is fs.ErrExist (Link, the sink face,
// replaces it instead; everything else is shared, see addLink).
func (v *FS) LinkAt(ino Ino, dir Ino, name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	in, err := v.inoLocked(ino)
	if err != nil {
		return err
	}
	pin, d, err := v.dirLocked(dir)
	if err != nil {
		return err
	}
	return v.addLink(in, pin, d, name, false)
}
