package ext4lite

import (
	"bytes"
	"encoding/binary"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

func (v *FS) setAllXattrs(in *inode, m map[string][]byte) error {
	if !in.xattrsOK && len(m) == 0 && in.d.FileACL() == 0 && !v.hasInodeXattrs(in) {
		return nil
	}
	xs := make([]xattr, 0, len(m))
	for k, val := range m {
		if err := v.checkXattr(k, val); err != nil {
			return err
		}
		xs = append(xs, xattr{name: k, value: bytes.Clone(val)})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].name < xs[j].name })
	if err := v.xattrsFit(in.d.ExtraIsize, sortedForStore(xs)); err != nil {
		return err
	}
	in.xattrs, in.xattrsOK, in.xattrDirt, in.dirty = xs, true, true, true
	return nil
}

func (v *FS) hasInodeXattrs(in *inode) bool {
	start := disk.GoodOldInodeSize + int(in.d.ExtraIsize)
	return v.inodeSize > disk.GoodOldInodeSize && start+4 <= v.inodeSize &&
		binary.LittleEndian.Uint32(in.slot[start:]) == disk.XattrMagic
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

// SetxattrIno creates or replaces one attribute (the inode face of
// Setxattr).
func (v *FS) SetxattrIno(ino Ino, name string, value []byte) error {
	return v.modifyIno(ino, func(in *inode) error { return v.editXattr(in, name, value, false) })
}

// RemovexattrIno deletes one attribute (syscall.ENODATA when absent; the
// inode face of Removexattr).
func (v *FS) RemovexattrIno(ino Ino, name string) error {
	return v.modifyIno(ino, func(in *inode) error { return v.editXattr(in, name, nil, true) })
}

// getxattrLocked, listxattrLocked and editXattr serve both the path and
// the inode API (v.mu held).
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

// editXattr sets name to value in in's attributes, or with remove deletes
// it: the one implementation of Setxattr, SetxattrIno, Removexattr and
// RemovexattrIno.
func (v *FS) editXattr(in *inode, name string, value []byte, remove bool) error {
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

// Getxattr returns one attribute's value.
func (v *FS) Getxattr(p, name string) ([]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("getxattr", p)
	if err != nil {
		return nil, err
	}
	val, err := v.getxattrLocked(in, name)
	if err != nil {
		return nil, pathErr("getxattr", p, err)
	}
	return val, nil
}

// Listxattr returns the names of p's attributes, sorted.
func (v *FS) Listxattr(p string) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("listxattr", p)
	if err != nil {
		return nil, err
	}
	return v.listxattrLocked(in)
}

// Setxattr creates or replaces one attribute.
func (v *FS) Setxattr(p, name string, value []byte) error {
	return v.modify("setxattr", p, func(in *inode) error { return v.editXattr(in, name, value, false) })
}

// Removexattr deletes one attribute.
func (v *FS) Removexattr(p, name string) error {
	return v.modify("removexattr", p, func(in *inode) error { return v.editXattr(in, name, nil, true) })
}
