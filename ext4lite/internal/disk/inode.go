package disk

import (
	"encoding/binary"
	"time"
)

// Inode geometry.
const (
	GoodOldInodeSize = 128 // EXT4_GOOD_OLD_INODE_SIZE
	InodeExtraSize   = 32  // i_extra_isize we write: up to and including i_projid
	NBlocks          = 15  // EXT4_N_BLOCKS: i_block is 15 32-bit words (60 bytes)
	DindBlock        = 13  // EXT4_DIND_BLOCK: i_block's double-indirect slot (block maps)
	FastSymlinkMax   = 59  // a symlink target shorter than 60 bytes lives in i_block
)

// i_mode file type bits (S_IF*).
const (
	ModeTypeMask = 0o170000
	ModeSocket   = 0o140000
	ModeSymlink  = 0o120000
	ModeReg      = 0o100000
	ModeBlock    = 0o060000
	ModeDir      = 0o040000
	ModeChar     = 0o020000
	ModeFifo     = 0o010000
)

// i_flags bits.
const (
	FlagSecrm      = 0x1
	FlagImmutable  = 0x10
	FlagAppend     = 0x20
	FlagIndex      = 0x1000 // EXT4_INDEX_FL: hashed (htree) directory
	FlagHugeFile   = 0x40000
	FlagExtents    = 0x80000
	FlagEAInode    = 0x200000
	FlagInlineData = 0x10000000
	FlagEncrypt    = 0x800
	FlagCasefold   = 0x40000000
	FlagVerity     = 0x100000
)

// Inode is struct ext4_inode up to i_projid (160 bytes: the 128-byte base
// plus 32 extra bytes). Bytes past it (in-inode xattrs) are handled apart.
type Inode struct {
	Mode        uint16            // i_mode
	UIDLo       uint16            // i_uid
	SizeLo      uint32            // i_size_lo
	Atime       uint32            // i_atime
	Ctime       uint32            // i_ctime
	Mtime       uint32            // i_mtime
	Dtime       uint32            // i_dtime
	GIDLo       uint16            // i_gid
	LinksCount  uint16            // i_links_count
	BlocksLo    uint32            // i_blocks_lo
	Flags       uint32            // i_flags
	Version     uint32            // osd1.linux1.l_i_version
	Block       [NBlocks * 4]byte // i_block
	Generation  uint32            // i_generation
	FileACLLo   uint32            // i_file_acl_lo
	SizeHigh    uint32            // i_size_high
	ObsoFaddr   uint32            // i_obso_faddr
	BlocksHigh  uint16            // osd2.linux2.l_i_blocks_high
	FileACLHigh uint16            // osd2.linux2.l_i_file_acl_high
	UIDHigh     uint16            // osd2.linux2.l_i_uid_high
	GIDHigh     uint16            // osd2.linux2.l_i_gid_high
	ChecksumLo  uint16            // osd2.linux2.l_i_checksum_lo
	Reserved    uint16            // osd2.linux2.l_i_reserved
	ExtraIsize  uint16            // i_extra_isize
	ChecksumHi  uint16            // i_checksum_hi
	CtimeExtra  uint32            // i_ctime_extra
	MtimeExtra  uint32            // i_mtime_extra
	AtimeExtra  uint32            // i_atime_extra
	Crtime      uint32            // i_crtime
	CrtimeExtra uint32            // i_crtime_extra
	VersionHi   uint32            // i_version_hi
	Projid      uint32            // i_projid
}

// InodeStructSize is the encoded size of Inode.
const InodeStructSize = GoodOldInodeSize + InodeExtraSize

// Byte offsets of the checksum fields within an on-disk inode.
const (
	offChecksumLo = 0x7C
	offChecksumHi = 0x82
	offExtraIsize = 0x80
)

// DecodeInode parses an on-disk inode of inodeSize bytes. Extra fields the
// inode's i_extra_isize does not cover read as zero.
func DecodeInode(b []byte) *Inode {
	var full [InodeStructSize]byte
	n := copy(full[:], b)
	if n >= offExtraIsize+2 {
		extra := int(binary.LittleEndian.Uint16(b[offExtraIsize:]))
		if end := GoodOldInodeSize + extra; end < n {
			clear(full[end:])
		}
	}
	in := new(Inode)
	in.decode(&full)
	return in
}

// decode and encode spell out the layout (encoding/binary's reflection
// was a tenth of an import's CPU); TestInodeCodec checks them against it.
func (in *Inode) decode(b *[InodeStructSize]byte) {
	le := binary.LittleEndian
	in.Mode, in.UIDLo, in.SizeLo = le.Uint16(b[0x0:]), le.Uint16(b[0x2:]), le.Uint32(b[0x4:])
	in.Atime, in.Ctime, in.Mtime, in.Dtime = le.Uint32(b[0x8:]), le.Uint32(b[0xC:]), le.Uint32(b[0x10:]), le.Uint32(b[0x14:])
	in.GIDLo, in.LinksCount = le.Uint16(b[0x18:]), le.Uint16(b[0x1A:])
	in.BlocksLo, in.Flags, in.Version = le.Uint32(b[0x1C:]), le.Uint32(b[0x20:]), le.Uint32(b[0x24:])
	copy(in.Block[:], b[0x28:0x64])
	in.Generation, in.FileACLLo, in.SizeHigh, in.ObsoFaddr = le.Uint32(b[0x64:]), le.Uint32(b[0x68:]), le.Uint32(b[0x6C:]), le.Uint32(b[0x70:])
	in.BlocksHigh, in.FileACLHigh, in.UIDHigh, in.GIDHigh = le.Uint16(b[0x74:]), le.Uint16(b[0x76:]), le.Uint16(b[0x78:]), le.Uint16(b[0x7A:])
	in.ChecksumLo, in.Reserved, in.ExtraIsize, in.ChecksumHi = le.Uint16(b[0x7C:]), le.Uint16(b[0x7E:]), le.Uint16(b[0x80:]), le.Uint16(b[0x82:])
	in.CtimeExtra, in.MtimeExtra, in.AtimeExtra = le.Uint32(b[0x84:]), le.Uint32(b[0x88:]), le.Uint32(b[0x8C:])
	in.Crtime, in.CrtimeExtra, in.VersionHi, in.Projid = le.Uint32(b[0x90:]), le.Uint32(b[0x94:]), le.Uint32(b[0x98:]), le.Uint32(b[0x9C:])
}

func (in *Inode) encode(b *[InodeStructSize]byte) {
	le := binary.LittleEndian
	le.PutUint16(b[0x0:], in.Mode)
	le.PutUint16(b[0x2:], in.UIDLo)
	le.PutUint32(b[0x4:], in.SizeLo)
	le.PutUint32(b[0x8:], in.Atime)
	le.PutUint32(b[0xC:], in.Ctime)
	le.PutUint32(b[0x10:], in.Mtime)
	le.PutUint32(b[0x14:], in.Dtime)
	le.PutUint16(b[0x18:], in.GIDLo)
	le.PutUint16(b[0x1A:], in.LinksCount)
	le.PutUint32(b[0x1C:], in.BlocksLo)
	le.PutUint32(b[0x20:], in.Flags)
	le.PutUint32(b[0x24:], in.Version)
	copy(b[0x28:0x64], in.Block[:])
	le.PutUint32(b[0x64:], in.Generation)
	le.PutUint32(b[0x68:], in.FileACLLo)
	le.PutUint32(b[0x6C:], in.SizeHigh)
	le.PutUint32(b[0x70:], in.ObsoFaddr)
	le.PutUint16(b[0x74:], in.BlocksHigh)
	le.PutUint16(b[0x76:], in.FileACLHigh)
	le.PutUint16(b[0x78:], in.UIDHigh)
	le.PutUint16(b[0x7A:], in.GIDHigh)
	le.PutUint16(b[0x7C:], in.ChecksumLo)
	le.PutUint16(b[0x7E:], in.Reserved)
	le.PutUint16(b[0x80:], in.ExtraIsize)
	le.PutUint16(b[0x82:], in.ChecksumHi)
	le.PutUint32(b[0x84:], in.CtimeExtra)
	le.PutUint32(b[0x88:], in.MtimeExtra)
	le.PutUint32(b[0x8C:], in.AtimeExtra)
	le.PutUint32(b[0x90:], in.Crtime)
	le.PutUint32(b[0x94:], in.CrtimeExtra)
	le.PutUint32(b[0x98:], in.VersionHi)
	le.PutUint32(b[0x9C:], in.Projid)
}

// EncodeInto writes in over the first bytes of b (an inode slot of the
// volume's inode size). Bytes past i_extra_isize are left alone.
func (in *Inode) EncodeInto(b []byte) {
	var full [InodeStructSize]byte
	in.encode(&full)
	n := GoodOldInodeSize
	if len(b) > GoodOldInodeSize {
		n = min(GoodOldInodeSize+int(in.ExtraIsize), InodeStructSize, len(b))
	}
	copy(b[:n], full[:n])
}

// InodeChecksum computes the metadata_csum checksum of the on-disk inode
// slot b (its checksum fields are treated as zero).
func InodeChecksum(seed uint32, ino uint32, b []byte) uint32 {
	gen := binary.LittleEndian.Uint32(b[0x64:])
	c := InodeSeed(seed, ino, gen)
	c = CRC32c(c, b[:offChecksumLo])
	c = CRC32c(c, []byte{0, 0})
	c = CRC32c(c, b[offChecksumLo+2:GoodOldInodeSize])
	if len(b) > GoodOldInodeSize {
		extra := int(binary.LittleEndian.Uint16(b[offExtraIsize:]))
		c = CRC32c(c, b[GoodOldInodeSize:offChecksumHi])
		if extra >= 4 {
			c = CRC32c(c, []byte{0, 0})
			c = CRC32c(c, b[offChecksumHi+2:])
		} else {
			c = CRC32c(c, b[offChecksumHi:])
		}
	}
	return c
}

// SetInodeChecksum stores InodeChecksum into the slot's checksum fields.
func SetInodeChecksum(seed uint32, ino uint32, b []byte) {
	c := InodeChecksum(seed, ino, b)
	binary.LittleEndian.PutUint16(b[offChecksumLo:], uint16(c))
	if len(b) > GoodOldInodeSize && binary.LittleEndian.Uint16(b[offExtraIsize:]) >= 4 {
		binary.LittleEndian.PutUint16(b[offChecksumHi:], uint16(c>>16))
	}
}

// VerifyInodeChecksum reports whether the slot's stored checksum matches.
func VerifyInodeChecksum(seed uint32, ino uint32, b []byte) bool {
	c := InodeChecksum(seed, ino, b)
	if uint16(c) != binary.LittleEndian.Uint16(b[offChecksumLo:]) {
		return false
	}
	if len(b) > GoodOldInodeSize && binary.LittleEndian.Uint16(b[offExtraIsize:]) >= 4 {
		return uint16(c>>16) == binary.LittleEndian.Uint16(b[offChecksumHi:])
	}
	return true
}

// InodeSeed is the per-inode checksum seed used by the inode, its extent
// blocks and its directory blocks.
func InodeSeed(fsSeed, ino, gen uint32) uint32 {
	return CRC32cU32(CRC32cU32(fsSeed, ino), gen)
}

// UID is the 32-bit owner.
func (in *Inode) UID() uint32 { return uint32(in.UIDHigh)<<16 | uint32(in.UIDLo) }

// GID is the 32-bit group.
func (in *Inode) GID() uint32 { return uint32(in.GIDHigh)<<16 | uint32(in.GIDLo) }

// SetOwner stores uid and gid.
func (in *Inode) SetOwner(uid, gid uint32) {
	in.UIDLo, in.UIDHigh = uint16(uid), uint16(uid>>16)
	in.GIDLo, in.GIDHigh = uint16(gid), uint16(gid>>16)
}

// Size is the 64-bit i_size.
func (in *Inode) Size() uint64 { return uint64(in.SizeHigh)<<32 | uint64(in.SizeLo) }

// SetSize stores the 64-bit i_size.
func (in *Inode) SetSize(n uint64) { in.SizeLo, in.SizeHigh = uint32(n), uint32(n>>32) }

// MaxFileSize is the largest size an extent-mapped file can reach, the
// kernel's s_maxbytes (fs/ext4/super.c, ext4_max_size): ee_block is 32
// bits and the last block must be addressable with a length, so 2^32 - 1
// blocks; without huge_file, i_blocks counts 512-byte sectors in 32 bits.
func MaxFileSize(blockSize int, hugeFile bool) uint64 {
	res := uint64(1<<32-1) * uint64(blockSize)
	if !hugeFile {
		sectorsPerBlock := uint64(blockSize / 512)
		res = min(res, uint64(1<<32-1)/sectorsPerBlock*uint64(blockSize))
	}
	return res
}

// MaxExtentISize is the largest i_size e2fsck accepts on an extent-mapped
// file (e2fsck/pass1.c check_blocks: 2^(32 + log2 block size) - 1; larger
// is "i_size is N, should be M").
func MaxExtentISize(blockSize int) uint64 { return uint64(blockSize)<<32 - 1 }

// FileACL is the block number of the external xattr block.
func (in *Inode) FileACL() uint64 { return uint64(in.FileACLHigh)<<32 | uint64(in.FileACLLo) }

// SetFileACL stores the external xattr block number.
func (in *Inode) SetFileACL(b uint64) { in.FileACLLo, in.FileACLHigh = uint32(b), uint16(b>>32) }

// Blocks returns i_blocks in 512-byte sectors (huge_file scaling applied).
func (in *Inode) Blocks(blockSize int) uint64 {
	n := uint64(in.BlocksHigh)<<32 | uint64(in.BlocksLo)
	if in.Flags&FlagHugeFile != 0 {
		n *= uint64(blockSize / 512)
	}
	return n
}

// SetBlocks stores i_blocks in 512-byte sectors (without FlagHugeFile).
func (in *Inode) SetBlocks(sectors uint64) {
	in.BlocksLo, in.BlocksHigh = uint32(sectors), uint16(sectors>>32)
	in.Flags &^= FlagHugeFile
}

// Time decoding and encoding. An extended timestamp keeps 2 epoch bits
// (seconds bits 32–33) and 30 bits of nanoseconds in *_extra.

// DecodeTime combines a 32-bit seconds field and its extra field.
func DecodeTime(sec, extra uint32) time.Time {
	s := int64(int32(sec)) + int64(extra&3)<<32
	return time.Unix(s, int64(extra>>2)).UTC()
}

// EncodeTime splits t into a seconds field and an extra field. Times
// outside ext4's range (1901..2446) are clamped.
func EncodeTime(t time.Time) (sec, extra uint32) {
	s := t.Unix()
	const lo, hi = -(1 << 31), (1 << 31) + (3 << 32) - 1
	ns := uint32(t.Nanosecond())
	if s < lo {
		s, ns = lo, 0
	} else if s > hi {
		s, ns = hi, 999999999
	}
	epoch := uint32((s-int64(int32(s)))>>32) & 3
	return uint32(int32(s)), ns<<2 | epoch
}
