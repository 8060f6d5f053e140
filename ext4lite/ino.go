package ext4lite

import (
	"bytes"
	"io/fs"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// The inode API: what a file server (the runtime's lisafs server) needs.
// Handles name inodes, not paths, so a handle stays valid when a directory
// above it is renamed, and a file unlinked while referenced (Ref) lives on
// until its last Unref, as POSIX open files do.

// Ino is an inode number.
type Ino uint32

// RootIno is the root directory's inode.
const RootIno Ino = disk.RootIno

func (v *FS) inoLocked(ino Ino) (*inode, error) {
	if ino == 0 || uint32(ino) > v.sb.InodesCount {
		return nil, fs.ErrNotExist
	}
	in, err := v.getInode(uint32(ino))
	if err != nil {
		return nil, err
	}
	if in.d.LinksCount == 0 && !in.orphan && uint32(ino) != disk.RootIno {
		return nil, fs.ErrNotExist
	}
	return in, nil
}

func (v *FS) dirLocked(ino Ino) (*inode, *dir, error) {
	in, err := v.inoLocked(ino)
	if err != nil {
		return nil, nil, err
	}
	if !in.isDir() {
		return nil, nil, errNotDir
	}
	if in.orphan {
		return nil, nil, fs.ErrNotExist // a removed directory has no entries
	}
	d, err := v.loadDir(in)
	return in, d, err
}

// GetxattrIno returns one attribute (syscall.ENODATA when absent).
func (v *FS) GetxattrIno(ino Ino, name string) ([]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return nil, err
	}
	return v.getxattrLocked(in, name)
}

// ListxattrIno returns the attribute names, sorted.
func (v *FS) ListxattrIno(ino Ino) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return nil, err
	}
	return v.listxattrLocked(in)
}

// SetxattrIno sets (or, with remove, removes) one attribute.
func (v *FS) SetxattrIno(ino Ino, name string, value []byte, remove bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	in, err := v.inoLocked(ino)
	if err != nil {
		return err
	}
	if err := v.setxattrLocked(in, name, value, remove); err != nil {
		return err
	}
	v.touchCtime(in)
	return nil
}

// getxattrLocked, listxattrLocked and setxattrLocked serve both the path
// and the inode API (v.mu held).
func (v *FS) getxattrLocked(in *inode, name string) ([]byte, error) {
	xs, err := v.loadXattrs(in)
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if x.name == name {
			return bytes.Clone(x.value), nil
		}
	}
	return nil, errNoAttr
}

func (v *FS) listxattrLocked(in *inode) ([]string, error) {
	xs, err := v.loadXattrs(in)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = x.name
	}
	return names, nil
}

func (v *FS) setxattrLocked(in *inode, name string, value []byte, remove bool) error {
	if _, _, ok := disk.XattrSplitName(name); !ok {
		return ErrUnsupported
	}
	if !remove {
		if err := v.checkXattr(name, value); err != nil {
			return err
		}
	}
	xs, err := v.loadXattrs(in)
	if err != nil {
		return err
	}
	out := append([]xattr(nil), xs...)
	i := sort.Search(len(out), func(i int) bool { return out[i].name >= name })
	found := i < len(out) && out[i].name == name
	switch {
	case remove && !found:
		return errNoAttr
	case remove:
		out = append(out[:i], out[i+1:]...)
	case found:
		out[i].value = bytes.Clone(value)
	default:
		out = append(out, xattr{})
		copy(out[i+1:], out[i:])
		out[i] = xattr{name, bytes.Clone(value)}
	}
	if err := v.xattrsFit(in.d.ExtraIsize, sortedForStore(out)); err != nil {
		return err
	}
	in.xattrs, in.xattrDirt, in.dirty = out, true, true
	return nil
}

// Ref takes a reference on an inode (an open file): if its last link goes
// while referenced, it lives on, readable and writable, until Unref.
func (v *FS) Ref(ino Ino) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.refs == nil {
		v.refs = map[uint32]int{}
	}
	v.refs[uint32(ino)]++
}

// Unref drops a reference taken by Ref, freeing an unlinked inode whose
// last reference it was.
func (v *FS) Unref(ino Ino) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.refs[uint32(ino)] - 1
	if n > 0 {
		v.refs[uint32(ino)] = n
		return nil
	}
	delete(v.refs, uint32(ino))
	in, ok := v.inodes[uint32(ino)]
	if !ok || !in.orphan {
		return nil
	}
	if v.closed || v.readOnly {
		return nil
	}
	if err := v.removeOrphan(in); err != nil {
		return err
	}
	in.orphan = false
	return v.release(in)
}
