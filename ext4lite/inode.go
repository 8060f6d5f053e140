package ext4lite

import (
	"math"
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// inode is a cached inode: its decoded core, its raw slot (for the bytes
// ext4lite does not model), and lazily loaded extents and xattrs.
type inode struct {
	ino  uint32
	d    disk.Inode
	slot []byte // the on-disk slot, inodeSize bytes

	ext       *extentMap // nil until loaded (regular files, dirs, slow symlinks)
	xattrs    []xattr    // nil until loaded (xattrsLoaded tells)
	xattrsOK  bool
	xattrBlk  uint64 // external xattr block in use (0 = none)
	dirty     bool
	xattrDirt bool
	orphan    bool // unlinked but referenced (Ref): on the orphan list
}

func (in *inode) mode() uint32     { return uint32(in.d.Mode) }
func (in *inode) fileType() uint32 { return uint32(in.d.Mode) & disk.ModeTypeMask }
func (in *inode) isDir() bool      { return in.fileType() == disk.ModeDir }

// inodeLoc returns the byte offset of ino's slot.
func (v *FS) inodeLoc(ino uint32) (int64, error) {
	if ino == 0 || ino > v.sb.InodesCount {
		return 0, corruptf(-1, ino, "inode number out of range (1..%d)", v.sb.InodesCount)
	}
	g, idx := (ino-1)/v.inodesPerGroup, (ino-1)%v.inodesPerGroup
	return int64(v.groups[g].desc.InodeTable())*int64(v.bs) + int64(idx)*int64(v.inodeSize), nil
}

// getInode returns the cached inode, reading it on first use.
func (v *FS) getInode(ino uint32) (*inode, error) {
	if in, ok := v.inodes[ino]; ok {
		return in, nil
	}
	off, err := v.inodeLoc(ino)
	if err != nil {
		return nil, err
	}
	slot := make([]byte, v.inodeSize)
	if err := v.readAt(slot, off); err != nil {
		return nil, err
	}
	in := &inode{ino: ino, slot: slot, d: *disk.DecodeInode(slot)}
	if v.inodeSize > disk.GoodOldInodeSize {
		if e := int(in.d.ExtraIsize); e > v.inodeSize-disk.GoodOldInodeSize || e%4 != 0 {
			return nil, corruptf(off, ino, "i_extra_isize %d", e)
		}
	}
	if v.csum && !isZero(slot) && !disk.VerifyInodeChecksum(v.seed, ino, slot) {
		return nil, corruptf(off, ino, "inode checksum mismatch")
	}
	if s := in.d.Size(); s > math.MaxInt64 {
		// No file can be that big (every API and the kernel's loff_t are
		// signed 64-bit): a garbage i_size_high. It read as a negative
		// size, which broke the tar export of the volume (fuzz.FuzzExt4).
		return nil, corruptf(off, ino, "i_size %d past 2^63-1 (i_size_high %#x)", s, in.d.SizeHigh)
	}
	in.xattrBlk = in.d.FileACL()
	if v.readOnly && len(v.inodes) >= readOnlyCachedInodes {
		v.forgetReadOnlyCache()
	}
	v.inodes[ino] = in
	return in, nil
}

// readOnlyCachedInodes and readOnlyCachedDirents bound what a read-only
// volume keeps decoded. A walk of the whole volume (export, ls -l, the
// tree diff of a test) would otherwise keep every inode and directory
// it met: about 1 KiB per inode, 300 MiB for 300,000 files, gigabytes
// for a large volume a guest filled. Read-only, nothing is dirty and
// nothing is shared by pointer identity (callers hold the objects they
// are using; a later lookup decodes the inode again), so the cache is
// simply dropped when full.
var (
	readOnlyCachedInodes  = 1 << 16
	readOnlyCachedDirents = 1 << 20 // variables: tests lower them
)

// forgetReadOnlyCache drops a read-only volume's decoded inodes and
// directories.
func (v *FS) forgetReadOnlyCache() {
	clear(v.inodes)
	clear(v.dirs)
	v.cachedDirents = 0
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// newInode allocates and caches a fresh inode of the given mode.
func (v *FS) newInode(mode uint32, uid, gid uint32, t time.Time) (*inode, error) {
	ino, err := v.allocInode(mode&disk.ModeTypeMask == disk.ModeDir)
	if err != nil {
		return nil, err
	}
	in := &inode{ino: ino, slot: make([]byte, v.inodeSize), xattrsOK: true, dirty: true}
	in.d.Mode = uint16(mode)
	in.d.SetOwner(uid, gid)
	if v.inodeSize > disk.GoodOldInodeSize {
		in.d.ExtraIsize = disk.InodeExtraSize
	}
	in.d.Generation = v.nextGeneration()
	v.setTimes(in, t, t, t, t)
	v.inodes[ino] = in
	return in, nil
}

// nextGeneration returns i_generation for a new inode. It is 0, as
// mkfs.ext4 -d writes: ext4lite serves no NFS handles, and a constant keeps
// images deterministic.
func (v *FS) nextGeneration() uint32 { return 0 }

// setTimes stores the four timestamps.
func (v *FS) setTimes(in *inode, atime, mtime, ctime, crtime time.Time) {
	in.d.Atime, in.d.AtimeExtra = disk.EncodeTime(atime)
	in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(mtime)
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(ctime)
	in.d.Crtime, in.d.CrtimeExtra = disk.EncodeTime(crtime)
	in.dirty = true
}

// writeInode encodes in into its slot and writes it.
func (v *FS) writeInode(in *inode) error {
	in.d.EncodeInto(in.slot)
	if v.csum {
		disk.SetInodeChecksum(v.seed, in.ino, in.slot)
	}
	off, err := v.inodeLoc(in.ino)
	if err != nil {
		return err
	}
	if err := v.metaWriteAt(in.slot, off); err != nil {
		return err
	}
	in.dirty = false
	return nil
}

// seedOf is the inode's checksum seed for its extent and directory blocks.
func (v *FS) seedOf(in *inode) uint32 {
	return disk.InodeSeed(v.seed, in.ino, in.d.Generation)
}
