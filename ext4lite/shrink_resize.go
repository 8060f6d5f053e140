package ext4lite

import (
	"encoding/binary"
	"fmt"
	"math"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// Shrinking a volume with resize_inode, mke2fs's default.
//
// The resize inode (inode 7) reserves room for the descriptor table to
// grow online: s_reserved_gdt_blocks blocks follow the descriptor table
// in group 0 and in every group with a superblock backup, and inode 7 maps
// them through its double-indirect block. Entry (gdt+i) mod (bs/4) of that
// block is group 0's i-th reserved block, and that block is an indirect
// block listing its copies in the backup groups, in ascending group order;
// i_blocks counts every block so mapped. e2fsck (check_resize_inode) and
// Linux (verify_reserved_gdb, at online resize) check exactly this layout.
//
// Shrink keeps the feature, as resize2fs does: descriptor blocks the
// smaller table no longer needs become reserved blocks (up to bs/4, the
// most e2fsck and Linux accept; any beyond are freed), and inode 7 is
// rebuilt from scratch for the new geometry, which drops the copies in the
// dropped groups. Keeping it was chosen over clearing the feature because
// the rebuild is one function of the geometry, with no state carried over,
// and the volume keeps growing online through the reserved blocks as
// before (without them Linux converts it to meta_bg, which ext4lite does
// not open). The rebuilt blocks are staged in the same flush as the new
// superblock and descriptors, so with a journal a crash leaves either the
// old volume or the new one; without one, a crash mid-write may leave a
// stale resize inode, which `e2fsck -fy` rebuilds.

// resizeLayout is where the reserved descriptor blocks lie for one
// geometry.
type resizeLayout struct {
	first   uint64   // group 0's first block (s_first_data_block)
	gdt     uint32   // descriptor blocks
	res     uint32   // reserved descriptor blocks
	backups []uint64 // offsets of the backup groups' copies: g*blocks per group, ascending
}

// resizeLayoutOf is the layout for the first groups groups with gdt
// descriptor blocks and res reserved ones.
func (v *FS) resizeLayoutOf(groups, gdt, res uint32) resizeLayout {
	l := resizeLayout{first: v.firstDataBlock, gdt: gdt, res: res}
	for g := uint32(1); g < groups; g++ {
		if v.hasSuper(g) {
			l.backups = append(l.backups, uint64(g)*uint64(v.blocksPerGroup))
		}
	}
	return l
}

// primary is group 0's i-th reserved descriptor block.
func (l *resizeLayout) primary(i uint32) uint64 { return l.first + 1 + uint64(l.gdt) + uint64(i) }

// slot is the double-indirect entry that maps the i-th reserved block.
func (l *resizeLayout) slot(i uint32, apb uint32) uint32 { return (l.gdt + i) % apb }

// checkResizeInode validates the reserved descriptor count and inode 7
// against the layout e2fsck and Linux check, before Shrink moves anything:
// the rebuild overwrites the double-indirect block and the reserved
// blocks, so they must be what the superblock says they are. It returns
// inode 7, or nil when the volume has no resize_inode.
func (v *FS) checkResizeInode() (*inode, error) {
	res := uint32(v.sb.ReservedGdtBlocks)
	if v.sb.FeatureCompat&disk.CompatResizeInode == 0 {
		if res != 0 {
			return nil, resizeErr(corruptf(disk.SuperblockOffset, 0, "s_reserved_gdt_blocks is %d without resize_inode", res))
		}
		return nil, nil
	}
	apb := uint32(v.bs / 4)
	if res > apb {
		return nil, resizeErr(corruptf(disk.SuperblockOffset, 0, "s_reserved_gdt_blocks is %d, more than the %d one block addresses", res, apb))
	}
	if v.superOverhead(0) >= v.groupBlocks(0) {
		return nil, resizeErr(corruptf(disk.SuperblockOffset, 0, "the descriptor table and %d reserved blocks fill group 0 (%d blocks)", res, v.groupBlocks(0)))
	}
	l := v.resizeLayoutOf(v.groupCount, v.gdtBlocks, res)
	if len(l.backups) > int(apb) {
		return nil, fmt.Errorf("%w: shrink: %d superblock backups, more than one indirect block of the resize inode lists", ErrUnsupported, len(l.backups))
	}
	if v.blocksCount > math.MaxUint32 {
		return nil, fmt.Errorf("%w: shrink: resize_inode on a volume past 2^32 blocks (the resize inode maps 32-bit block numbers only)", ErrUnsupported)
	}
	in, err := v.getInode(disk.ResizeIno)
	if err != nil {
		return nil, resizeErr(err)
	}
	off, _ := v.inodeLoc(disk.ResizeIno)
	bad := func(format string, args ...any) (*inode, error) {
		return nil, resizeErr(corruptf(off, disk.ResizeIno, format, args...))
	}
	if in.fileType() != disk.ModeReg || in.d.LinksCount == 0 {
		return bad("the resize inode is not a regular file in use (mode %#o, %d links)", in.d.Mode, in.d.LinksCount)
	}
	for i := 0; i < disk.NBlocks; i++ {
		if w := binary.LittleEndian.Uint32(in.d.Block[4*i:]); w != 0 && i != disk.DindBlock {
			return bad("i_block[%d] is %d; the resize inode maps only its double-indirect block", i, w)
		}
	}
	dind := uint64(binary.LittleEndian.Uint32(in.d.Block[4*disk.DindBlock:]))
	if dind < v.firstDataBlock || dind >= v.blocksCount {
		return bad("double-indirect block %d outside the filesystem", dind)
	}
	g := uint32((dind - v.firstDataBlock) / uint64(v.blocksPerGroup))
	if dind-v.groupFirstBlock(g) < uint64(v.superOverhead(g)) {
		return bad("double-indirect block %d lies in group %d's superblock and descriptors", dind, g)
	}
	bm, err := v.blockBitmapOf(g)
	if err != nil {
		return nil, err
	}
	if !testBit(bm, uint32(dind-v.groupFirstBlock(g))) {
		return bad("double-indirect block %d is free in the block bitmap", dind)
	}
	dbuf, ibuf := make([]byte, v.bs), make([]byte, v.bs)
	if err := v.readBlock(dind, dbuf); err != nil {
		return nil, err
	}
	for i := uint32(0); i < res; i++ {
		p := l.primary(i)
		if got := binary.LittleEndian.Uint32(dbuf[4*l.slot(i, apb):]); uint64(got) != p {
			return bad("double-indirect block %d entry %d is %d, want reserved descriptor block %d", dind, l.slot(i, apb), got, p)
		}
		if err := v.readBlock(p, ibuf); err != nil {
			return nil, err
		}
		for k, o := range l.backups {
			if got := binary.LittleEndian.Uint32(ibuf[4*k:]); uint64(got) != p+o {
				return bad("reserved descriptor block %d entry %d is %d, want its copy %d", p, k, got, p+o)
			}
		}
	}
	return in, nil
}

// resizeErr says how to fix a resize inode Shrink does not trust.
func resizeErr(err error) error {
	return fmt.Errorf("shrink: resize inode (inode %d): %w (run e2fsck -f on the volume, which rebuilds it, then shrink again)", disk.ResizeIno, err)
}

// shrinkReserved is the reserved descriptor count after the table shrinks
// from oldGdt to newGdt blocks: the blocks freed become reserved ones, as
// resize2fs does, up to one block of addresses.
func (v *FS) shrinkReserved(oldGdt, newGdt uint32) uint32 {
	return min(uint32(v.sb.ReservedGdtBlocks)+oldGdt-newGdt, uint32(v.bs/4))
}

// writeResizeInode rebuilds inode 7 for the current geometry with its
// double-indirect block at dind: every entry is written afresh (the
// dropped groups' copies are gone) and i_blocks counts what it maps. The
// blocks are staged for the next flush.
func (v *FS) writeResizeInode(in *inode, dind uint64) error {
	apb := uint32(v.bs / 4)
	l := v.resizeLayoutOf(v.groupCount, v.gdtBlocks, uint32(v.sb.ReservedGdtBlocks))
	dbuf, ibuf := make([]byte, v.bs), make([]byte, v.bs)
	mapped := uint64(1) // the double-indirect block
	for i := uint32(0); i < l.res; i++ {
		p := l.primary(i)
		binary.LittleEndian.PutUint32(dbuf[4*l.slot(i, apb):], uint32(p))
		clear(ibuf)
		for k, o := range l.backups {
			binary.LittleEndian.PutUint32(ibuf[4*k:], uint32(p+o))
		}
		if err := v.metaWriteBlock(p, ibuf); err != nil {
			return err
		}
		mapped += 1 + uint64(len(l.backups))
	}
	if err := v.metaWriteBlock(dind, dbuf); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(in.d.Block[4*disk.DindBlock:], uint32(dind))
	in.d.SetBlocks(mapped * uint64(v.bs/512))
	return v.writeInode(in)
}
