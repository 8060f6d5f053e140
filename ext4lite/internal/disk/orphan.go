package disk

import (
	"encoding/binary"
	"fmt"
)

// The orphan file (compat feature orphan_file, inode s_orphan_file_inum,
// linked from no directory) replaces the s_last_orphan chain on volumes
// made by e2fsprogs ≥ 1.47: each of its blocks is an array of __le32 inode
// numbers (0 = empty slot) followed by a tail. Ground truth: the kernel's
// Documentation/filesystems/ext4/orphan.rst and fs/ext4/orphan.c;
// e2fsprogs lib/ext2fs/orphan.c.

const (
	// OrphanBlockMagic is ob_magic (EXT4_ORPHAN_BLOCK_MAGIC).
	OrphanBlockMagic = 0x0b10ca04
	// OrphanBlockTailSize is sizeof(struct ext4_orphan_block_tail):
	// ob_magic, ob_checksum, in the last 8 bytes of the block.
	OrphanBlockTailSize = 8
)

// OrphanEntriesPerBlock is ext4_inodes_per_orphan_block: the entries a
// block of size bs holds before its tail.
func OrphanEntriesPerBlock(bs int) int { return (bs - OrphanBlockTailSize) / 4 }

// OrphanBlock is one decoded block of the orphan file. It aliases the
// bytes it was decoded from.
type OrphanBlock struct {
	raw      []byte
	Magic    uint32 // ob_magic
	Checksum uint32 // ob_checksum (meaningful with metadata_csum only)
}

// DecodeOrphanBlock decodes one orphan file block. The only error is a
// block too small to be an ext4 block (under 1 KiB or not a multiple of
// 4 bytes): the magic and checksum are the caller's to judge (Valid).
func DecodeOrphanBlock(b []byte) (*OrphanBlock, error) {
	if len(b) < 1024 || len(b)%4 != 0 {
		return nil, fmt.Errorf("orphan file block of %d bytes", len(b))
	}
	t := b[len(b)-OrphanBlockTailSize:]
	return &OrphanBlock{raw: b, Magic: binary.LittleEndian.Uint32(t), Checksum: binary.LittleEndian.Uint32(t[4:])}, nil
}

// Len is the number of entry slots.
func (ob *OrphanBlock) Len() int { return OrphanEntriesPerBlock(len(ob.raw)) }

// Entry is slot i's inode number, 0 when the slot is empty.
func (ob *OrphanBlock) Entry(i int) uint32 { return binary.LittleEndian.Uint32(ob.raw[4*i:]) }

// ComputeChecksum is what ob_checksum must hold for the block at
// physical block blk of the orphan file inode whose checksum seed is
// inodeSeed (InodeSeed(fs seed, ino, i_generation)): crc32c over
// le64(blk) then the entries (ext4_orphan_file_block_csum_verify).
func (ob *OrphanBlock) ComputeChecksum(inodeSeed uint32, blk uint64) uint32 {
	return CRC32c(CRC32cU64(inodeSeed, blk), ob.raw[:4*ob.Len()])
}

// Valid reports the first problem with the tail: a wrong magic, or with
// csum (metadata_csum) a wrong checksum; "" when there is none. Both are
// what the kernel refuses the volume's mount for.
func (ob *OrphanBlock) Valid(csum bool, inodeSeed uint32, blk uint64) string {
	if ob.Magic != OrphanBlockMagic {
		return fmt.Sprintf("orphan file block magic %#x, want %#x", ob.Magic, OrphanBlockMagic)
	}
	if csum {
		if want := ob.ComputeChecksum(inodeSeed, blk); ob.Checksum != want {
			return fmt.Sprintf("orphan file block checksum %#x, computed %#x", ob.Checksum, want)
		}
	}
	return ""
}

// SetChecksum stores ComputeChecksum in ob_checksum (in the decoded
// bytes).
func (ob *OrphanBlock) SetChecksum(inodeSeed uint32, blk uint64) {
	ob.Checksum = ob.ComputeChecksum(inodeSeed, blk)
	binary.LittleEndian.PutUint32(ob.raw[len(ob.raw)-4:], ob.Checksum)
}
