package ext4lite

import (
	"io/fs"

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
