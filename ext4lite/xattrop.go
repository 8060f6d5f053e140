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
