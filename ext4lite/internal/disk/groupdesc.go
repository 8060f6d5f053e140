package disk

import (
	"encoding/binary"
)

// Group descriptor sizes.
const (
	GroupDescSize32 = 32 // without 64bit
	GroupDescSize64 = 64 // EXT4_MIN_DESC_SIZE_64BIT
)

// bg_flags bits.
const (
	BGInodeUninit = 0x1 // EXT4_BG_INODE_UNINIT
	BGBlockUninit = 0x2 // EXT4_BG_BLOCK_UNINIT
	BGInodeZeroed = 0x4 // EXT4_BG_INODE_ZEROED
)

// GroupDesc is struct ext4_group_desc, 64 bytes (the first 32 without 64bit).
// With 64bit, s_desc_size may be larger (any power of two up to 1024,
// EXT4_MAX_DESC_SIZE): the bytes past 64 belong to no field this version
// knows; callers keep them (EncodeInto leaves them alone) and checksum the
// whole descriptor, as the kernel does.
type GroupDesc struct {
	BlockBitmapLo     uint32 // bg_block_bitmap_lo
	InodeBitmapLo     uint32 // bg_inode_bitmap_lo
	InodeTableLo      uint32 // bg_inode_table_lo
	FreeBlocksCountLo uint16 // bg_free_blocks_count_lo
	FreeInodesCountLo uint16 // bg_free_inodes_count_lo
	UsedDirsCountLo   uint16 // bg_used_dirs_count_lo
	Flags             uint16 // bg_flags
	ExcludeBitmapLo   uint32 // bg_exclude_bitmap_lo
	BlockBitmapCsumLo uint16 // bg_block_bitmap_csum_lo
	InodeBitmapCsumLo uint16 // bg_inode_bitmap_csum_lo
	ItableUnusedLo    uint16 // bg_itable_unused_lo
	Checksum          uint16 // bg_checksum
	BlockBitmapHi     uint32 // bg_block_bitmap_hi
	InodeBitmapHi     uint32 // bg_inode_bitmap_hi
	InodeTableHi      uint32 // bg_inode_table_hi
	FreeBlocksCountHi uint16 // bg_free_blocks_count_hi
	FreeInodesCountHi uint16 // bg_free_inodes_count_hi
	UsedDirsCountHi   uint16 // bg_used_dirs_count_hi
	ItableUnusedHi    uint16 // bg_itable_unused_hi
	ExcludeBitmapHi   uint32 // bg_exclude_bitmap_hi
	BlockBitmapCsumHi uint16 // bg_block_bitmap_csum_hi
	InodeBitmapCsumHi uint16 // bg_inode_bitmap_csum_hi
	Reserved          uint32 // bg_reserved
}

// DecodeGroupDesc parses the fields of a descriptor of descSize bytes (32,
// or 64 and more); b holds at least descSize bytes.
func DecodeGroupDesc(b []byte, descSize int) *GroupDesc {
	var full [GroupDescSize64]byte
	copy(full[:], b[:min(descSize, GroupDescSize64)])
	gd := new(GroupDesc)
	binary.Decode(full[:], binary.LittleEndian, gd)
	if descSize < GroupDescSize64 {
		// The high halves do not exist on disk.
		gd.BlockBitmapHi, gd.InodeBitmapHi, gd.InodeTableHi = 0, 0, 0
		gd.FreeBlocksCountHi, gd.FreeInodesCountHi, gd.UsedDirsCountHi = 0, 0, 0
		gd.ItableUnusedHi, gd.ExcludeBitmapHi = 0, 0
		gd.BlockBitmapCsumHi, gd.InodeBitmapCsumHi, gd.Reserved = 0, 0, 0
	}
	return gd
}

// EncodeInto writes gd's fields into the first min(descSize, 64) bytes of
// b; bytes past 64 of a larger descriptor are left as they are.
func (gd *GroupDesc) EncodeInto(b []byte, descSize int) {
	var full [GroupDescSize64]byte
	binary.Encode(full[:], binary.LittleEndian, gd)
	n := min(descSize, GroupDescSize64)
	copy(b[:n], full[:n])
}

// BlockBitmap is the 64-bit block number of the block bitmap.
func (gd *GroupDesc) BlockBitmap() uint64 {
	return uint64(gd.BlockBitmapHi)<<32 | uint64(gd.BlockBitmapLo)
}

// InodeBitmap is the 64-bit block number of the inode bitmap.
func (gd *GroupDesc) InodeBitmap() uint64 {
	return uint64(gd.InodeBitmapHi)<<32 | uint64(gd.InodeBitmapLo)
}

// InodeTable is the 64-bit block number of the inode table.
func (gd *GroupDesc) InodeTable() uint64 {
	return uint64(gd.InodeTableHi)<<32 | uint64(gd.InodeTableLo)
}

// SetLocations stores the bitmap and table block numbers.
func (gd *GroupDesc) SetLocations(blockBitmap, inodeBitmap, inodeTable uint64) {
	gd.BlockBitmapLo, gd.BlockBitmapHi = uint32(blockBitmap), uint32(blockBitmap>>32)
	gd.InodeBitmapLo, gd.InodeBitmapHi = uint32(inodeBitmap), uint32(inodeBitmap>>32)
	gd.InodeTableLo, gd.InodeTableHi = uint32(inodeTable), uint32(inodeTable>>32)
}

// FreeBlocks is bg_free_blocks_count.
func (gd *GroupDesc) FreeBlocks() uint32 {
	return uint32(gd.FreeBlocksCountHi)<<16 | uint32(gd.FreeBlocksCountLo)
}

// SetFreeBlocks stores bg_free_blocks_count.
func (gd *GroupDesc) SetFreeBlocks(n uint32) {
	gd.FreeBlocksCountLo, gd.FreeBlocksCountHi = uint16(n), uint16(n>>16)
}

// FreeInodes is bg_free_inodes_count.
func (gd *GroupDesc) FreeInodes() uint32 {
	return uint32(gd.FreeInodesCountHi)<<16 | uint32(gd.FreeInodesCountLo)
}

// SetFreeInodes stores bg_free_inodes_count.
func (gd *GroupDesc) SetFreeInodes(n uint32) {
	gd.FreeInodesCountLo, gd.FreeInodesCountHi = uint16(n), uint16(n>>16)
}

// UsedDirs is bg_used_dirs_count.
func (gd *GroupDesc) UsedDirs() uint32 {
	return uint32(gd.UsedDirsCountHi)<<16 | uint32(gd.UsedDirsCountLo)
}

// SetUsedDirs stores bg_used_dirs_count.
func (gd *GroupDesc) SetUsedDirs(n uint32) {
	gd.UsedDirsCountLo, gd.UsedDirsCountHi = uint16(n), uint16(n>>16)
}

// ItableUnused is bg_itable_unused.
func (gd *GroupDesc) ItableUnused() uint32 {
	return uint32(gd.ItableUnusedHi)<<16 | uint32(gd.ItableUnusedLo)
}

// SetItableUnused stores bg_itable_unused.
func (gd *GroupDesc) SetItableUnused(n uint32) {
	gd.ItableUnusedLo, gd.ItableUnusedHi = uint16(n), uint16(n>>16)
}

// SetBitmapChecksums stores the block and inode bitmap checksums (the high
// halves only exist in 64-byte descriptors).
func (gd *GroupDesc) SetBitmapChecksums(block, inode uint32, descSize int) {
	gd.BlockBitmapCsumLo, gd.InodeBitmapCsumLo = uint16(block), uint16(inode)
	if descSize >= GroupDescSize64 {
		gd.BlockBitmapCsumHi, gd.InodeBitmapCsumHi = uint16(block>>16), uint16(inode>>16)
	}
}

// GroupDescChecksum computes bg_checksum for metadata_csum volumes:
// crc32c(seed, le32 group, desc with bg_checksum zeroed) & 0xFFFF.
func GroupDescChecksum(seed uint32, group uint32, desc []byte) uint16 {
	c := CRC32cU32(seed, group)
	c = CRC32c(c, desc[:0x1E])
	c = CRC32c(c, []byte{0, 0})
	c = CRC32c(c, desc[0x20:])
	return uint16(c)
}

// GroupDescChecksumCrc16 computes bg_checksum for gdt_csum (uninit_bg)
// volumes: crc16(~0, uuid, le32 group, desc without the checksum field).
func GroupDescChecksumCrc16(uuid [16]byte, group uint32, desc []byte) uint16 {
	c := Crc16(0xFFFF, uuid[:])
	var g [4]byte
	binary.LittleEndian.PutUint32(g[:], group)
	c = Crc16(c, g[:])
	c = Crc16(c, desc[:0x1E])
	if len(desc) > 0x20 {
		c = Crc16(c, desc[0x20:])
	}
	return c
}
