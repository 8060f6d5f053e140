// Package disk declares EROFS's on-disk structures and constants, once, with
// the field names of erofs-utils' include/erofs_fs.h in Go case
// (i_xattr_icount → XattrIcount). It only encodes and decodes fixed-size
// records; it validates nothing — package erofs does.
//
// Everything is little-endian. Spec: the kernel's
// Documentation/filesystems/erofs.rst and erofs-utils' include/erofs_fs.h.
package disk

import "encoding/binary"

var le = binary.LittleEndian

// Geometry.
const (
	SuperOffset  = 1024       // EROFS_SUPER_OFFSET
	SuperMagicV1 = 0xE0F5E1E2 // EROFS_SUPER_MAGIC_V1
	BlockBits    = 12         // the only block size gvx writes: 4 KiB
	BlockSize    = 1 << BlockBits
	SlotBits     = 5 // EROFS_ISLOTBITS: a nid counts 32-byte slots
	SlotSize     = 1 << SlotBits
	NameLen      = 255 // EROFS_NAME_LEN
)

// Sizes of the on-disk records, asserted by a test against the encoders.
const (
	SuperSize            = 128
	InodeCompactSize     = 32
	InodeExtendedSize    = 64
	DirentSize           = 12
	XattrIbodyHeaderSize = 12
	XattrEntrySize       = 4
)

// CompatFeature is a bit of erofs_super_block.feature_compat: a reader that
// does not know it may still mount the image.
type CompatFeature uint32

// Compatible features.
const (
	CompatSBChksum     CompatFeature = 0x01 // EROFS_FEATURE_COMPAT_SB_CHKSUM
	CompatMtime        CompatFeature = 0x02 // EROFS_FEATURE_COMPAT_MTIME
	CompatXattrFilter  CompatFeature = 0x04 // EROFS_FEATURE_COMPAT_XATTR_FILTER
	CompatPlainXattrPf CompatFeature = 0x10 // EROFS_FEATURE_COMPAT_PLAIN_XATTR_PFX
)

// IncompatFeature is a bit of erofs_super_block.feature_incompat: a reader
// that does not know it must refuse the image.
type IncompatFeature uint32

// Incompatible features.
const (
	IncompatZeroPadding    IncompatFeature = 0x001 // EROFS_FEATURE_INCOMPAT_ZERO_PADDING (compressed data only)
	IncompatComprCfgs      IncompatFeature = 0x002 // EROFS_FEATURE_INCOMPAT_COMPR_CFGS
	IncompatChunkedFile    IncompatFeature = 0x004 // EROFS_FEATURE_INCOMPAT_CHUNKED_FILE
	IncompatDeviceTable    IncompatFeature = 0x008 // EROFS_FEATURE_INCOMPAT_DEVICE_TABLE
	IncompatZTailPacking   IncompatFeature = 0x010 // EROFS_FEATURE_INCOMPAT_ZTAILPACKING
	IncompatFragments      IncompatFeature = 0x020 // EROFS_FEATURE_INCOMPAT_FRAGMENTS
	IncompatXattrPrefixes  IncompatFeature = 0x040 // EROFS_FEATURE_INCOMPAT_XATTR_PREFIXES
	Incompat48Bit          IncompatFeature = 0x080 // EROFS_FEATURE_INCOMPAT_48BIT
	IncompatMetabox        IncompatFeature = 0x100 // EROFS_FEATURE_INCOMPAT_METABOX
	IncompatSupportedByGvx                 = IncompatZeroPadding
)

// Inode format bits (i_format).
const (
	FormatVersionMask    = 0x01 // EROFS_I_VERSION_MASK: 0 compact, 1 extended
	FormatDataLayoutBit  = 1    // EROFS_I_DATALAYOUT_BIT
	FormatDataLayoutMask = 0x07 // EROFS_I_DATALAYOUT_MASK
	FormatAll            = 0x1f // EROFS_I_ALL

	LayoutCompact  = 0 // EROFS_INODE_LAYOUT_COMPACT
	LayoutExtended = 1 // EROFS_INODE_LAYOUT_EXTENDED
)

// Data layouts (bits 1..3 of i_format).
const (
	FlatPlain          = 0 // EROFS_INODE_FLAT_PLAIN: contiguous blocks
	CompressedFull     = 1 // EROFS_INODE_COMPRESSED_FULL
	FlatInline         = 2 // EROFS_INODE_FLAT_INLINE: blocks + tail after the inode
	CompressedCompact  = 3 // EROFS_INODE_COMPRESSED_COMPACT
	ChunkBased         = 4 // EROFS_INODE_CHUNK_BASED
	DataLayoutMaxKnown = 4
)

// Dirent file types (EROFS_FT_*).
const (
	FTUnknown = 0
	FTRegFile = 1
	FTDir     = 2
	FTChrdev  = 3
	FTBlkdev  = 4
	FTFifo    = 5
	FTSock    = 6
	FTSymlink = 7
	FTMax     = 8
)

// Xattr name indexes (EROFS_XATTR_INDEX_*).
const (
	XattrIndexUser             = 1
	XattrIndexPosixACLAccess   = 2
	XattrIndexPosixACLDefault  = 3
	XattrIndexTrusted          = 4
	XattrIndexLustre           = 5
	XattrIndexSecurity         = 6
	XattrLongPrefix            = 0x80 // EROFS_XATTR_LONG_PREFIX
	XattrIbodyMaxIcount        = 0xffff
	XattrValueMax              = 0xffff // e_value_size is 16 bits
	XattrNameMax               = 0xff   // e_name_len is 8 bits
	XattrPrefixUser            = "user."
	XattrPrefixTrusted         = "trusted."
	XattrPrefixSecurity        = "security."
	XattrNamePosixACLAccess    = "system.posix_acl_access"
	XattrNamePosixACLDefault   = "system.posix_acl_default"
	XattrPrefixLustre          = "lustre."
	XattrSharedEntryAlignBytes = 4
)

// Super is struct erofs_super_block (the 128 bytes every reader knows).
type Super struct {
	Magic             uint32   // magic
	Checksum          uint32   // checksum: crc32c of the block from offset 1024, this field zero
	FeatureCompat     uint32   // feature_compat
	BlkSzBits         uint8    // blkszbits
	SbExtSlots        uint8    // sb_extslots
	RootNid           uint16   // rootnid_2b
	Inos              uint64   // inos
	Epoch             uint64   // epoch (was build_time): base seconds of compact inodes
	FixedNsec         uint32   // fixed_nsec (was build_time_nsec)
	BlocksLo          uint32   // blocks_lo
	MetaBlkAddr       uint32   // meta_blkaddr
	XattrBlkAddr      uint32   // xattr_blkaddr
	UUID              [16]byte // uuid
	VolumeName        [16]byte // volume_name
	FeatureIncompat   uint32   // feature_incompat
	U1                uint16   // available_compr_algs / lz4_max_distance
	ExtraDevices      uint16   // extra_devices
	DevtSlotOff       uint16   // devt_slotoff
	DirBlkBits        uint8    // dirblkbits
	XattrPrefixCount  uint8    // xattr_prefix_count
	XattrPrefixStart  uint32   // xattr_prefix_start
	PackedNid         uint64   // packed_nid
	XattrFilterRsv    uint8    // xattr_filter_reserved
	Reserved          [3]byte  // reserved
	BuildTime         uint32   // build_time: seconds added to epoch
	RootNid8b         uint64   // rootnid_8b (48BIT only)
	Reserved2Leftover [8]byte  // first 8 bytes of reserved2
}

// Marshal encodes s into b[:SuperSize].
func (s *Super) Marshal(b []byte) {
	_ = b[SuperSize-1]
	le.PutUint32(b[0:], s.Magic)
	le.PutUint32(b[4:], s.Checksum)
	le.PutUint32(b[8:], s.FeatureCompat)
	b[12] = s.BlkSzBits
	b[13] = s.SbExtSlots
	le.PutUint16(b[14:], s.RootNid)
	le.PutUint64(b[16:], s.Inos)
	le.PutUint64(b[24:], s.Epoch)
	le.PutUint32(b[32:], s.FixedNsec)
	le.PutUint32(b[36:], s.BlocksLo)
	le.PutUint32(b[40:], s.MetaBlkAddr)
	le.PutUint32(b[44:], s.XattrBlkAddr)
	copy(b[48:64], s.UUID[:])
	copy(b[64:80], s.VolumeName[:])
	le.PutUint32(b[80:], s.FeatureIncompat)
	le.PutUint16(b[84:], s.U1)
	le.PutUint16(b[86:], s.ExtraDevices)
	le.PutUint16(b[88:], s.DevtSlotOff)
	b[90] = s.DirBlkBits
	b[91] = s.XattrPrefixCount
	le.PutUint32(b[92:], s.XattrPrefixStart)
	le.PutUint64(b[96:], s.PackedNid)
	b[104] = s.XattrFilterRsv
	copy(b[105:108], s.Reserved[:])
	le.PutUint32(b[108:], s.BuildTime)
	le.PutUint64(b[112:], s.RootNid8b)
	copy(b[120:128], s.Reserved2Leftover[:])
}

// Unmarshal decodes b[:SuperSize] into s.
func (s *Super) Unmarshal(b []byte) {
	_ = b[SuperSize-1]
	s.Magic = le.Uint32(b[0:])
	s.Checksum = le.Uint32(b[4:])
	s.FeatureCompat = le.Uint32(b[8:])
	s.BlkSzBits = b[12]
	s.SbExtSlots = b[13]
	s.RootNid = le.Uint16(b[14:])
	s.Inos = le.Uint64(b[16:])
	s.Epoch = le.Uint64(b[24:])
	s.FixedNsec = le.Uint32(b[32:])
	s.BlocksLo = le.Uint32(b[36:])
	s.MetaBlkAddr = le.Uint32(b[40:])
	s.XattrBlkAddr = le.Uint32(b[44:])
	copy(s.UUID[:], b[48:64])
	copy(s.VolumeName[:], b[64:80])
	s.FeatureIncompat = le.Uint32(b[80:])
	s.U1 = le.Uint16(b[84:])
	s.ExtraDevices = le.Uint16(b[86:])
	s.DevtSlotOff = le.Uint16(b[88:])
	s.DirBlkBits = b[90]
	s.XattrPrefixCount = b[91]
	s.XattrPrefixStart = le.Uint32(b[92:])
	s.PackedNid = le.Uint64(b[96:])
	s.XattrFilterRsv = b[104]
	copy(s.Reserved[:], b[105:108])
	s.BuildTime = le.Uint32(b[108:])
	s.RootNid8b = le.Uint64(b[112:])
	copy(s.Reserved2Leftover[:], b[120:128])
}

// InodeCompact is struct erofs_inode_compact (32 bytes).
type InodeCompact struct {
	Format      uint16 // i_format
	XattrIcount uint16 // i_xattr_icount
	Mode        uint16 // i_mode
	Nlink       uint16 // i_nb.nlink
	Size        uint32 // i_size
	Mtime       uint32 // i_mtime: seconds after the superblock's epoch (ignored by older readers)
	U           uint32 // i_u: startblk_lo, rdev, ...
	Ino         uint32 // i_ino
	UID         uint16 // i_uid
	GID         uint16 // i_gid
	Reserved    uint32 // i_reserved
}

// Marshal encodes i into b[:InodeCompactSize].
func (i *InodeCompact) Marshal(b []byte) {
	_ = b[InodeCompactSize-1]
	le.PutUint16(b[0:], i.Format)
	le.PutUint16(b[2:], i.XattrIcount)
	le.PutUint16(b[4:], i.Mode)
	le.PutUint16(b[6:], i.Nlink)
	le.PutUint32(b[8:], i.Size)
	le.PutUint32(b[12:], i.Mtime)
	le.PutUint32(b[16:], i.U)
	le.PutUint32(b[20:], i.Ino)
	le.PutUint16(b[24:], i.UID)
	le.PutUint16(b[26:], i.GID)
	le.PutUint32(b[28:], i.Reserved)
}

// Unmarshal decodes b[:InodeCompactSize] into i.
func (i *InodeCompact) Unmarshal(b []byte) {
	_ = b[InodeCompactSize-1]
	i.Format = le.Uint16(b[0:])
	i.XattrIcount = le.Uint16(b[2:])
	i.Mode = le.Uint16(b[4:])
	i.Nlink = le.Uint16(b[6:])
	i.Size = le.Uint32(b[8:])
	i.Mtime = le.Uint32(b[12:])
	i.U = le.Uint32(b[16:])
	i.Ino = le.Uint32(b[20:])
	i.UID = le.Uint16(b[24:])
	i.GID = le.Uint16(b[26:])
	i.Reserved = le.Uint32(b[28:])
}

// InodeExtended is struct erofs_inode_extended (64 bytes).
type InodeExtended struct {
	Format      uint16   // i_format
	XattrIcount uint16   // i_xattr_icount
	Mode        uint16   // i_mode
	NB          uint16   // i_nb (startblk_hi with 48BIT; else reserved)
	Size        uint64   // i_size
	U           uint32   // i_u
	Ino         uint32   // i_ino
	UID         uint32   // i_uid
	GID         uint32   // i_gid
	Mtime       uint64   // i_mtime
	MtimeNsec   uint32   // i_mtime_nsec
	Nlink       uint32   // i_nlink
	Reserved2   [16]byte // i_reserved2
}

// Marshal encodes i into b[:InodeExtendedSize].
func (i *InodeExtended) Marshal(b []byte) {
	_ = b[InodeExtendedSize-1]
	le.PutUint16(b[0:], i.Format)
	le.PutUint16(b[2:], i.XattrIcount)
	le.PutUint16(b[4:], i.Mode)
	le.PutUint16(b[6:], i.NB)
	le.PutUint64(b[8:], i.Size)
	le.PutUint32(b[16:], i.U)
	le.PutUint32(b[20:], i.Ino)
	le.PutUint32(b[24:], i.UID)
	le.PutUint32(b[28:], i.GID)
	le.PutUint64(b[32:], i.Mtime)
	le.PutUint32(b[40:], i.MtimeNsec)
	le.PutUint32(b[44:], i.Nlink)
	copy(b[48:64], i.Reserved2[:])
}

// Unmarshal decodes b[:InodeExtendedSize] into i.
func (i *InodeExtended) Unmarshal(b []byte) {
	_ = b[InodeExtendedSize-1]
	i.Format = le.Uint16(b[0:])
	i.XattrIcount = le.Uint16(b[2:])
	i.Mode = le.Uint16(b[4:])
	i.NB = le.Uint16(b[6:])
	i.Size = le.Uint64(b[8:])
	i.U = le.Uint32(b[16:])
	i.Ino = le.Uint32(b[20:])
	i.UID = le.Uint32(b[24:])
	i.GID = le.Uint32(b[28:])
	i.Mtime = le.Uint64(b[32:])
	i.MtimeNsec = le.Uint32(b[40:])
	i.Nlink = le.Uint32(b[44:])
	copy(i.Reserved2[:], b[48:64])
}

// Dirent is struct erofs_dirent (12 bytes). A directory block holds n
// dirents, then their names in the same order; the first dirent's NameOff
// is n*12. The last name ends at the block's (or directory's) end or at a
// NUL byte.
type Dirent struct {
	Nid      uint64 // nid
	NameOff  uint16 // nameoff, from the block's start
	FileType uint8  // file_type: FT*
	Reserved uint8  // reserved
}

// Marshal encodes d into b[:DirentSize].
func (d *Dirent) Marshal(b []byte) {
	_ = b[DirentSize-1]
	le.PutUint64(b[0:], d.Nid)
	le.PutUint16(b[8:], d.NameOff)
	b[10] = d.FileType
	b[11] = d.Reserved
}

// Unmarshal decodes b[:DirentSize] into d.
func (d *Dirent) Unmarshal(b []byte) {
	_ = b[DirentSize-1]
	d.Nid = le.Uint64(b[0:])
	d.NameOff = le.Uint16(b[8:])
	d.FileType = b[10]
	d.Reserved = b[11]
}

// XattrIbodyHeader is struct erofs_xattr_ibody_header (12 bytes), followed
// by SharedCount 4-byte shared xattr ids and then inline xattr entries.
type XattrIbodyHeader struct {
	NameFilter  uint32  // h_name_filter (only with CompatXattrFilter)
	SharedCount uint8   // h_shared_count
	Reserved2   [7]byte // h_reserved2
}

// Marshal encodes h into b[:XattrIbodyHeaderSize].
func (h *XattrIbodyHeader) Marshal(b []byte) {
	_ = b[XattrIbodyHeaderSize-1]
	le.PutUint32(b[0:], h.NameFilter)
	b[4] = h.SharedCount
	copy(b[5:12], h.Reserved2[:])
}

// Unmarshal decodes b[:XattrIbodyHeaderSize] into h.
func (h *XattrIbodyHeader) Unmarshal(b []byte) {
	_ = b[XattrIbodyHeaderSize-1]
	h.NameFilter = le.Uint32(b[0:])
	h.SharedCount = b[4]
	copy(h.Reserved2[:], b[5:12])
}

// XattrEntry is struct erofs_xattr_entry (4 bytes), followed by NameLen
// bytes of name (without its prefix) and ValueSize bytes of value, padded to
// 4 bytes. Inline and shared xattrs use the same record.
type XattrEntry struct {
	NameLen   uint8  // e_name_len
	NameIndex uint8  // e_name_index
	ValueSize uint16 // e_value_size
}

// Marshal encodes e into b[:XattrEntrySize].
func (e *XattrEntry) Marshal(b []byte) {
	_ = b[XattrEntrySize-1]
	b[0] = e.NameLen
	b[1] = e.NameIndex
	le.PutUint16(b[2:], e.ValueSize)
}

// Unmarshal decodes b[:XattrEntrySize] into e.
func (e *XattrEntry) Unmarshal(b []byte) {
	_ = b[XattrEntrySize-1]
	e.NameLen = b[0]
	e.NameIndex = b[1]
	e.ValueSize = le.Uint16(b[2:])
}

// XattrIbodySize is erofs_xattr_ibody_size: the bytes after the inode that
// hold its xattrs, for an i_xattr_icount of n.
func XattrIbodySize(n uint16) int {
	if n == 0 {
		return 0
	}
	return XattrIbodyHeaderSize + 4*(int(n)-1)
}

// XattrAlign rounds n up to the 4-byte alignment of xattr entries.
func XattrAlign(n int) int { return (n + 3) &^ 3 }

// XattrEntryLen is the aligned size of an entry with the given name and
// value lengths.
func XattrEntryLen(nameLen, valueLen int) int {
	return XattrAlign(XattrEntrySize + nameLen + valueLen)
}

// EncodeDev is the kernel's new_encode_dev, the i_u.rdev of device inodes.
func EncodeDev(major, minor uint32) uint32 {
	return (minor & 0xff) | (major&0xfff)<<8 | (minor&^0xff)<<12
}

// DecodeDev is the kernel's new_decode_dev.
func DecodeDev(dev uint32) (major, minor uint32) {
	return (dev & 0xfff00) >> 8, (dev & 0xff) | (dev>>12)&0xfff00
}
