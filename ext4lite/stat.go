package ext4lite

import (
	"bytes"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// Lstat returns p's metadata without following a final symlink
// (sink.Source).
func (v *FS) Lstat(p string) (*sink.Header, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("lstat", p)
	if err != nil {
		return nil, err
	}
	h, err := v.header(in)
	if err != nil {
		return nil, pathErr("lstat", p, err)
	}
	h.Path = p
	return h, nil
}

// header is in's metadata as a sink.Header (Path empty): the one
// implementation behind Lstat (the path face) and Stat (the inode face).
func (v *FS) header(in *inode) (*sink.Header, error) {
	h := &sink.Header{
		Mode:  in.mode(),
		UID:   in.d.UID(),
		GID:   in.d.GID(),
		Ino:   uint64(in.ino),
		Nlink: uint32(in.d.LinksCount),
		Atime: disk.DecodeTime(in.d.Atime, in.d.AtimeExtra),
		Mtime: disk.DecodeTime(in.d.Mtime, in.d.MtimeExtra),
		Ctime: disk.DecodeTime(in.d.Ctime, in.d.CtimeExtra),
	}
	if in.d.ExtraIsize >= 24 {
		h.Crtime = disk.DecodeTime(in.d.Crtime, in.d.CrtimeExtra)
	}
	switch in.fileType() {
	case disk.ModeReg, disk.ModeDir:
		h.Size = int64(in.d.Size())
	case disk.ModeSymlink:
		t, err := v.readlink(in)
		if err != nil {
			return nil, err
		}
		h.Linkname = t
		h.Size = int64(len(t))
	case disk.ModeChar, disk.ModeBlock:
		h.Devmajor, h.Devminor = decodeDev(in.d.Block[:])
	}
	xs, err := v.loadXattrs(in)
	if err != nil {
		return nil, err
	}
	if len(xs) > 0 {
		h.Xattrs = make(map[string][]byte, len(xs))
		for _, x := range xs {
			h.Xattrs[x.name] = bytes.Clone(x.value)
		}
	}
	return h, nil
}

// Stat returns an inode's metadata (Path empty, Ino and Nlink set).
func (v *FS) Stat(ino Ino) (*sink.Header, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return nil, err
	}
	return v.header(in)
}

// ModeOwner returns an inode's mode (type and permission bits), owner
// and group: Stat without the header's other fields and xattrs, for a
// server that checks a directory on every create.
func (v *FS) ModeOwner(ino Ino) (mode, uid, gid uint32, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return 0, 0, 0, err
	}
	return in.mode(), in.d.UID(), in.d.GID(), nil
}

// StatFS describes capacity, as statfs(2) reports it.
type StatFS struct {
	BlockSize          int
	Blocks, FreeBlocks uint64
	Inodes, FreeInodes uint64
	NameLen            int
}

// StatFS returns the volume's capacity and free space.
func (v *FS) StatFS() StatFS {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := StatFS{BlockSize: v.bs, Blocks: v.blocksCount, Inodes: uint64(v.sb.InodesCount), NameLen: disk.MaxNameLen}
	for _, g := range v.groups {
		s.FreeBlocks += uint64(g.desc.FreeBlocks())
		s.FreeInodes += uint64(g.desc.FreeInodes())
	}
	for _, r := range v.pendingFree {
		s.FreeBlocks += r[1]
	}
	return s
}
