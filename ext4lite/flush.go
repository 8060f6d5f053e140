package ext4lite

import "sort"

// flushMetadata writes every cached change: directories (which may
// allocate blocks), xattrs, extent trees, inodes, then bitmaps, group
// descriptors and the superblock. Data blocks were written when they were
// written to, so metadata never points at unwritten data.
func (v *FS) flushMetadata() error {
	v.opsSinceFlush, v.dirsSinceFlush = 0, 0
	inos := make([]uint32, 0, len(v.dirs))
	for ino, d := range v.dirs {
		if d.dirty {
			inos = append(inos, ino)
		}
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		in, err := v.getInode(ino)
		if err != nil {
			return err
		}
		if err := v.storeDir(in, v.dirs[ino]); err != nil {
			return err
		}
	}
	inos = inos[:0]
	for ino, in := range v.inodes {
		if in.dirty || in.xattrDirt || (in.ext != nil && in.ext.dirty) {
			inos = append(inos, ino)
		}
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		in := v.inodes[ino]
		if err := v.storeXattrs(in); err != nil {
			return err
		}
		if err := v.storeExtents(in); err != nil {
			return err
		}
		if err := v.updateBlockCount(in); err != nil {
			return err
		}
		if err := v.writeInode(in); err != nil {
			return err
		}
	}
	if err := v.applyPendingFrees(); err != nil {
		return err
	}
	if err := v.flushGroups(); err != nil {
		return err
	}
	return v.commitMeta()
}
