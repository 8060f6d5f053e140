package jbd2

import (
	"fmt"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// FormatOptions are the inputs of Format.
type FormatOptions struct {
	UUID     [16]byte // the filesystem's UUID (s_uuid), stored in the journal superblock's s_uuid
	Features          // zero value: none, exactly what Debian's mkfs.ext4 writes
}

// MinBlocks is the smallest journal Linux loads (JBD2_MIN_JOURNAL_BLOCKS).
const MinBlocks = disk.MinBlocks

// Format writes a clean, empty journal superblock into block 0 of dev, as
// mkfs.ext4 does for an internal journal: s_start = 0, s_sequence = 1,
// s_maxlen = nblocks, s_first = 1, s_nr_users = 1, s_uuid = opts.UUID. The
// journal's other blocks are left as they are (callers pass zeroed space).
func Format(dev BlockDevice, blockSize int, nblocks uint32, opts FormatOptions) error {
	if err := checkBlockSize(blockSize); err != nil {
		return err
	}
	if nblocks < MinBlocks {
		return fmt.Errorf("jbd2: journal of %d blocks is below the minimum of %d", nblocks, MinBlocks)
	}
	if err := opts.Features.check(); err != nil {
		return err
	}
	sb := newSuperblock(blockSize, nblocks, opts)
	buf := make([]byte, blockSize)
	encodeSuperblock(sb, buf)
	if err := dev.WriteBlock(0, buf); err != nil {
		return fmt.Errorf("jbd2: writing superblock: %w", err)
	}
	return flush(dev)
}

func newSuperblock(blockSize int, nblocks uint32, opts FormatOptions) *disk.Superblock {
	sb := &disk.Superblock{
		Header:          disk.Header{Magic: disk.Magic, BlockType: disk.BlockSuperblockV2},
		BlockSize:       uint32(blockSize),
		MaxLen:          nblocks,
		First:           1,
		Sequence:        1,
		FeatureCompat:   opts.Compat,
		FeatureIncompat: opts.Incompat,
		FeatureRoCompat: opts.RoCompat,
		UUID:            opts.UUID,
		NrUsers:         1,
	}
	if sb.HasCsumV2or3() {
		sb.ChecksumType = disk.ChecksumCRC32C
	}
	return sb
}

// encodeSuperblock writes sb into the first SuperblockSize bytes of buf,
// with its checksum when the journal has v2/v3 checksums.
func encodeSuperblock(sb *disk.Superblock, buf []byte) {
	sb.Checksum = 0
	sb.Marshal(buf)
	if sb.HasCsumV2or3() {
		disk.SetSuperblockChecksum(buf)
		sb.Checksum = be32(buf[disk.SbOffChecksum:])
	}
}

func checkBlockSize(bs int) error {
	if bs < 1024 || bs > 65536 || bs&(bs-1) != 0 {
		return fmt.Errorf("jbd2: block size %d is not a power of two in [1024, 65536]", bs)
	}
	return nil
}

const magic = disk.Magic

func putBE32(p []byte, v uint32) {
	_ = p[3]
	p[0], p[1], p[2], p[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

func be32(p []byte) uint32 {
	_ = p[3]
	return uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
}

func superblockChecksum(p []byte) uint32 { return disk.SuperblockChecksum(p) }
