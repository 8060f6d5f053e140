package ext4lite

import (
	"bytes"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// group is one block group's descriptor and (lazily loaded) bitmaps.
type group struct {
	desc *disk.GroupDesc
	// raw is the descriptor's descSize on-disk bytes; desc's fields are
	// encoded over its first 64 and the rest (s_desc_size > 64) is kept.
	raw         []byte
	blockBitmap []byte // nil until loaded
	inodeBitmap []byte
	descDirty   bool
	bbDirty     bool
	ibDirty     bool
}

// hasSuper reports whether group g holds a superblock backup
// (disk.Superblock.HasSuperBackup).
func (v *FS) hasSuper(g uint32) bool { return v.sb.HasSuperBackup(g) }

// groupFirstBlock is the first block of group g.
func (v *FS) groupFirstBlock(g uint32) uint64 {
	return v.firstDataBlock + uint64(g)*uint64(v.blocksPerGroup)
}

// groupBlocks is the number of blocks in group g (the last may be short).
func (v *FS) groupBlocks(g uint32) uint32 {
	if g == v.groupCount-1 {
		return uint32(v.blocksCount - v.groupFirstBlock(g))
	}
	return v.blocksPerGroup
}

// superOverhead is the number of blocks at the start of group g taken by a
// superblock backup and group descriptor copy (reserved GDT blocks included).
func (v *FS) superOverhead(g uint32) uint32 {
	if !v.hasSuper(g) {
		return 0
	}
	return 1 + v.gdtBlocks + uint32(v.sb.ReservedGdtBlocks)
}

func (v *FS) loadGroupDescs() error {
	start := v.firstDataBlock + 1
	buf := make([]byte, int(v.gdtBlocks)*v.bs)
	if err := v.readAt(buf, int64(start)*int64(v.bs)); err != nil {
		return err
	}
	v.groups = make([]*group, v.groupCount)
	for g := uint32(0); g < v.groupCount; g++ {
		raw := buf[int(g)*v.descSize : int(g+1)*v.descSize]
		gd := disk.DecodeGroupDesc(raw, v.descSize)
		if v.csum {
			if want := disk.GroupDescChecksum(v.seed, g, raw); want != gd.Checksum {
				return corruptf(int64(start)*int64(v.bs)+int64(g)*int64(v.descSize), 0,
					"group %d descriptor checksum %#x, computed %#x", g, gd.Checksum, want)
			}
		}
		for _, b := range []uint64{gd.BlockBitmap(), gd.InodeBitmap()} {
			if b < v.firstDataBlock || b >= v.blocksCount {
				return corruptf(-1, 0, "group %d: bitmap block %d outside the filesystem", g, b)
			}
		}
		itBlocks := (uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs)
		if t := gd.InodeTable(); t < v.firstDataBlock || t+itBlocks > v.blocksCount {
			return corruptf(-1, 0, "group %d: inode table at block %d outside the filesystem", g, t)
		}
		v.groups[g] = &group{desc: gd, raw: bytes.Clone(raw)}
	}
	return nil
}

// blockBitmap returns group g's block bitmap, loading it on first use.
func (v *FS) blockBitmapOf(g uint32) ([]byte, error) {
	gr := v.groups[g]
	if gr.blockBitmap != nil {
		return gr.blockBitmap, nil
	}
	b := make([]byte, v.bs)
	if gr.desc.Flags&disk.BGBlockUninit != 0 && (v.csum || v.gdtCsum) {
		// Uninitialized: only the group's own metadata is in use.
		v.initBlockBitmap(g, b)
	} else if err := v.readBlock(gr.desc.BlockBitmap(), b); err != nil {
		return nil, err
	}
	gr.blockBitmap = b
	return b, nil
}

// initBlockBitmap computes the bitmap of a BLOCK_UNINIT group: superblock
// backup, descriptors and whatever metadata of any group lies inside it,
// plus the padding past the group's end.
func (v *FS) initBlockBitmap(g uint32, b []byte) {
	clear(b)
	first := v.groupFirstBlock(g)
	for i := uint32(0); i < v.superOverhead(g); i++ {
		setBit(b, i)
	}
	itBlocks := (uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs)
	mark := func(blk, n uint64) {
		for i := uint64(0); i < n; i++ {
			if blk+i >= first && blk+i < first+uint64(v.groupBlocks(g)) {
				setBit(b, uint32(blk+i-first))
			}
		}
	}
	for _, o := range v.groups {
		mark(o.desc.BlockBitmap(), 1)
		mark(o.desc.InodeBitmap(), 1)
		mark(o.desc.InodeTable(), itBlocks)
	}
	for i := v.groupBlocks(g); i < uint32(v.bs*8); i++ {
		setBit(b, i)
	}
}

// inodeBitmapOf returns group g's inode bitmap, loading it on first use.
func (v *FS) inodeBitmapOf(g uint32) ([]byte, error) {
	gr := v.groups[g]
	if gr.inodeBitmap != nil {
		return gr.inodeBitmap, nil
	}
	b := make([]byte, v.bs)
	if gr.desc.Flags&disk.BGInodeUninit != 0 && (v.csum || v.gdtCsum) {
		for i := v.inodesPerGroup; i < uint32(v.bs*8); i++ {
			setBit(b, i)
		}
	} else if err := v.readBlock(gr.desc.InodeBitmap(), b); err != nil {
		return nil, err
	}
	gr.inodeBitmap = b
	return b, nil
}

func setBit(b []byte, i uint32)       { b[i/8] |= 1 << (i % 8) }
func clearBit(b []byte, i uint32)     { b[i/8] &^= 1 << (i % 8) }
func testBit(b []byte, i uint32) bool { return b[i/8]&(1<<(i%8)) != 0 }

// flushGroups writes dirty bitmaps and descriptors (primary copy) and the
// superblock's free counts.
func (v *FS) flushGroups() error {
	var freeBlocks uint64
	var freeInodes uint32
	gdtDirty := false
	for g, gr := range v.groups {
		if gr.bbDirty {
			if err := v.metaWriteBlock(gr.desc.BlockBitmap(), gr.blockBitmap); err != nil {
				return err
			}
			gr.desc.Flags &^= disk.BGBlockUninit
			gr.bbDirty, gr.descDirty = false, true
		}
		if gr.ibDirty {
			if err := v.metaWriteBlock(gr.desc.InodeBitmap(), gr.inodeBitmap); err != nil {
				return err
			}
			gr.desc.Flags &^= disk.BGInodeUninit
			gr.ibDirty, gr.descDirty = false, true
		}
		if gr.descDirty {
			v.setGroupChecksums(uint32(g), gr)
			gdtDirty = true
			gr.descDirty = false
		}
		freeBlocks += uint64(gr.desc.FreeBlocks())
		freeInodes += gr.desc.FreeInodes()
	}
	if gdtDirty {
		if err := v.metaWriteAt(v.encodeGroupDescs(), int64(v.firstDataBlock+1)*int64(v.bs)); err != nil {
			return err
		}
	}
	v.sb.SetFreeBlocksCount(freeBlocks)
	v.sb.FreeInodesCount = freeInodes
	return v.metaWriteAt(v.superBytes(), disk.SuperblockOffset)
}

// setGroupChecksums recomputes bitmap checksums and the descriptor checksum.
func (v *FS) setGroupChecksums(g uint32, gr *group) {
	if v.csum {
		var bc, ic uint32
		if gr.blockBitmap != nil {
			bc = disk.CRC32c(v.seed, gr.blockBitmap[:v.blocksPerGroup/8])
		}
		if gr.inodeBitmap != nil {
			ic = disk.CRC32c(v.seed, gr.inodeBitmap[:v.inodesPerGroup/8])
		}
		if gr.blockBitmap == nil {
			bc = uint32(gr.desc.BlockBitmapCsumHi)<<16 | uint32(gr.desc.BlockBitmapCsumLo)
		}
		if gr.inodeBitmap == nil {
			ic = uint32(gr.desc.InodeBitmapCsumHi)<<16 | uint32(gr.desc.InodeBitmapCsumLo)
		}
		gr.desc.SetBitmapChecksums(bc, ic, v.descSize)
	}
	// The checksum covers the whole descriptor, bytes past 64 included.
	gr.desc.EncodeInto(gr.raw, v.descSize)
	switch {
	case v.csum:
		gr.desc.Checksum = disk.GroupDescChecksum(v.seed, g, gr.raw)
	case v.gdtCsum:
		gr.desc.Checksum = disk.GroupDescChecksumCrc16(v.sb.UUID, g, gr.raw)
	}
	gr.desc.EncodeInto(gr.raw, v.descSize)
}

// encodeGroupDescs returns the whole descriptor table.
func (v *FS) encodeGroupDescs() []byte {
	buf := make([]byte, int(v.gdtBlocks)*v.bs)
	for g, gr := range v.groups {
		d := buf[g*v.descSize : (g+1)*v.descSize]
		copy(d, gr.raw)
		gr.desc.EncodeInto(d, v.descSize)
	}
	return buf
}

// writeBackupSuperblocks refreshes every backup superblock and descriptor
// table, as e2fsck and resize2fs expect them to match the primary.
func (v *FS) writeBackupSuperblocks() error {
	for g := uint32(1); g < v.groupCount; g++ {
		if !v.hasSuper(g) {
			continue
		}
		first := v.groupFirstBlock(g)
		bsb := *v.sb
		bsb.BlockGroupNr = uint16(g)
		raw := bsb.Encode()
		off := int64(first) * int64(v.bs)
		if err := v.writeAt(raw, off); err != nil {
			return err
		}
		if err := v.writeAt(v.encodeGroupDescs(), int64(first+1)*int64(v.bs)); err != nil {
			return err
		}
	}
	return nil
}
