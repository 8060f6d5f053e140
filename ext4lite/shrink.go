package ext4lite

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// Shrink cuts the volume down to the fewest whole block groups that hold
// what is in use plus headroom: blocks in the groups to be dropped (file
// data, directory, extent tree and xattr blocks, the journal) are moved
// below the new end first, then the groups are dropped and, for a volume
// in a file, the file is truncated. Inodes are not renumbered: the volume
// cannot shrink below its highest inode in use. A volume with resize_inode
// (mke2fs's default) keeps it, rebuilt for the new size (shrink_resize.go).
// With a journal, a crash at any point leaves the old volume or the shrunk
// one (at worst with the journal's old blocks still allocated, in the one
// flush between its move and their release). It returns the new size in
// bytes. Run Compact afterwards to punch the freed space.
func (v *FS) Shrink() (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.writable(); err != nil {
		return 0, err
	}
	if len(v.refs) > 0 || v.sb.LastOrphan != 0 {
		return 0, fmt.Errorf("shrink: files are open; close them first")
	}
	if err := v.flushMetadata(); err != nil {
		return 0, err
	}
	resize, err := v.checkResizeInode()
	if err != nil {
		return 0, err
	}
	keep, err := v.shrinkTarget()
	if err != nil {
		return 0, err
	}
	if keep >= v.groupCount {
		return int64(v.blocksCount) * int64(v.bs), nil
	}
	if err := v.moveOut(keep); err != nil {
		return 0, err
	}
	if err := v.flushMoved(); err != nil {
		return 0, err
	}
	if len(v.movedLog) > 0 {
		// The old log is freed only now: Linux replaying the remap after a
		// crash keeps using the mapping it read before the replay, so the
		// blocks it may log to must not have been free in what it replays.
		for _, r := range v.movedLog {
			if err := v.freeBlocks(r[0], r[1]); err != nil {
				return 0, err
			}
		}
		v.movedLog = nil
		if err := v.setJnlBackup(); err != nil {
			return 0, err
		}
		if err := v.flushMetadata(); err != nil {
			return 0, err
		}
	}
	flushed := *v.sb
	err = v.dropGroups(keep, resize)
	v.allocEnd = 0
	if err != nil {
		return 0, v.forgetUnflushed(flushed, err)
	}
	// The new superblock goes home before the descriptors and reserved
	// blocks rewritten for it: a crash while they go home leaves the new
	// geometry over descriptors that are valid for the groups kept (old or
	// new), which the journal replay completes; the old geometry over new
	// descriptors would be refused by ext4lite and Linux before the replay.
	v.superFirst = true
	err = v.flushMetadata()
	v.superFirst = false
	if err != nil {
		return 0, err
	}
	if v.sb.JournalInum != 0 {
		if err := v.refreshJnlBackup(); err != nil {
			return 0, err
		}
	}
	size := int64(v.blocksCount) * int64(v.bs)
	if v.file != nil {
		if err := v.file.Truncate(size); err != nil {
			return 0, err
		}
	}
	return size, v.syncDevice()
}

// moveOut moves every block owned past the first keep groups below them
// and frees the blocks it moved from, so the flush after it leaves a
// consistent volume of the old size with nothing in the groups to be
// dropped but their own metadata (a crash before the groups are dropped
// leaves that volume). Allocation stays below the new end (allocEnd) until
// the groups are dropped. It runs right after a flush; should a move fail,
// what it changed in memory (blocks allocated and freed, extents
// remapped) is forgotten, so the volume stays as that flush left it (the
// blocks copied meanwhile went to free blocks) and Close does not write a
// half-made move.
func (v *FS) moveOut(keep uint32) error {
	sb := *v.sb
	v.allocEnd = v.groupFirstBlock(keep)
	err := v.moveBelow(keep, v.allocEnd)
	if err == nil {
		return nil
	}
	v.allocEnd = 0
	return v.forgetUnflushed(sb, err)
}

// flushMoved flushes what moveOut changed. When the journal moved, that
// flush is logged at its old place (journalDev.pinned), where the journal
// inode on disk points, and the inode's block goes home only after every
// other block of the flush is durable: a crash before leaves the old
// inode, whose log replays the flush; a crash after, the new inode, with
// nothing left to replay (its log is the old one's copy, empty).
func (v *FS) flushMoved() error {
	if v.jdev == nil || v.jdev.pinned == nil {
		return v.flushMetadata()
	}
	off, err := v.inodeLoc(v.sb.JournalInum)
	if err != nil {
		return err
	}
	v.homeLast = &homeLast{blk: uint64(off) / uint64(v.bs)}
	err = v.flushMetadata()
	v.homeLast = nil
	if err != nil {
		return err
	}
	v.jdev.pinned = nil // home: the journal inode on disk maps the moved log
	return nil
}

// forgetUnflushed drops what changed in memory since the last flush after
// a step of Shrink failed (err), so the volume stays as that flush left it
// and Close does not write a half-made step: the superblock goes back to
// sb, as flushed, and the geometry and descriptors are reloaded.
func (v *FS) forgetUnflushed(sb disk.Superblock, err error) error {
	*v.sb = sb
	v.inodes = map[uint32]*inode{}
	v.dirs = map[uint32]*dir{}
	v.forgetPaths()
	clear(v.meta)
	v.pendingFree = v.pendingFree[:0]
	v.allocCursor = 0
	v.movedLog = nil
	g, rerr := v.sb.Geometry()
	if rerr == nil {
		v.blocksCount, v.groupCount, v.gdtBlocks = g.Blocks, g.Groups, g.GDTBlocks
		rerr = v.loadGroupDescs()
	}
	if rerr == nil && v.jdev != nil {
		// The journal logs where the journal inode on disk says.
		var in *inode
		if in, rerr = v.getInode(v.sb.JournalInum); rerr == nil {
			v.jdev.in, v.jdev.pinned = in, nil
		}
	}
	if rerr != nil {
		return fmt.Errorf("%w; and forgetting the half-made shrink: %w (do not use this volume: restore it from a copy)", err, rerr)
	}
	return fmt.Errorf("%w; the volume is as before the shrink", err)
}

// shrinkTarget finds the fewest groups that can hold the volume.
func (v *FS) shrinkTarget() (uint32, error) {
	itb := uint64((uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs))
	var used uint64
	for g := uint32(0); g < v.groupCount; g++ {
		used += uint64(v.groupBlocks(g) - v.groups[g].desc.FreeBlocks())
	}
	// What is not per-group metadata moves; per-group metadata is counted
	// again for the groups kept.
	var meta uint64
	for g := uint32(0); g < v.groupCount; g++ {
		meta += 2 + itb + uint64(v.superOverhead(g))
	}
	data := used - min(used, meta)
	highest, err := v.highestInode()
	if err != nil {
		return 0, err
	}
	for keep := uint32(1); keep < v.groupCount; keep++ {
		var need uint64
		for g := uint32(0); g < keep; g++ {
			need += 2 + itb + uint64(v.superOverhead(g))
		}
		need += data + data/20 + 1024 // 5% and 4 MiB (at 4 KiB) of headroom
		if uint64(keep)*uint64(v.blocksPerGroup) >= need && highest <= keep*v.inodesPerGroup && v.moveFits(keep, itb, data) {
			if err := v.keptMetadataBelow(keep); err != nil {
				return 0, err
			}
			return keep, nil
		}
	}
	return v.groupCount, nil
}

// moveFits reports whether what lies past the end of keep groups fits in
// the free blocks below it while it moves. The dropped groups' bitmaps and
// inode tables that flex_bg put in kept groups are freed only after the
// move, so they count as in use until then: on a small volume with 1 KiB
// blocks they are half of group 0, and a journal in the tail would not fit
// in the rest (the size check after the move counts them as freed).
func (v *FS) moveFits(keep uint32, itb, data uint64) bool {
	end := v.groupFirstBlock(keep)
	var free, used, meta uint64 // below end
	for g := uint32(0); g < v.groupCount; g++ {
		if g < keep {
			free += uint64(v.groups[g].desc.FreeBlocks())
			used += uint64(v.groupBlocks(g) - v.groups[g].desc.FreeBlocks())
			meta += uint64(v.superOverhead(g))
		}
		d := v.groups[g].desc
		for _, r := range [][2]uint64{{d.BlockBitmap(), 1}, {d.InodeBitmap(), 1}, {d.InodeTable(), itb}} {
			if r[0] < end {
				meta += min(r[1], end-r[0])
			}
		}
	}
	below := used - min(used, meta) // data blocks already below end
	move := data - min(data, below)
	// Splitting extents may need new tree blocks: one per 64 blocks moved
	// is more than enough (a tree block holds 340 extents at 4 KiB, 84 at 1 KiB).
	return move+move/64+16 <= free
}

// highestInode is the largest inode number in use.
func (v *FS) highestInode() (uint32, error) {
	for g := int(v.groupCount) - 1; g >= 0; g-- {
		if v.groups[g].desc.FreeInodes() == v.inodesPerGroup {
			continue
		}
		bm, err := v.inodeBitmapOf(uint32(g))
		if err != nil {
			return 0, err
		}
		for i := int(v.inodesPerGroup) - 1; i >= 0; i-- {
			if testBit(bm, uint32(i)) {
				return uint32(g)*v.inodesPerGroup + uint32(i) + 1, nil
			}
		}
	}
	return 0, nil
}

// keptMetadataBelow checks that the bitmaps and inode tables of the kept
// groups lie below the new end (flex_bg puts them in the flex group's
// first group, so they do unless a dense layout spilled them further).
func (v *FS) keptMetadataBelow(keep uint32) error {
	end := v.groupFirstBlock(keep)
	itb := uint64((uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs))
	for g := uint32(0); g < keep; g++ {
		d := v.groups[g].desc
		if d.BlockBitmap() >= end || d.InodeBitmap() >= end || d.InodeTable()+itb > end {
			return fmt.Errorf("%w: shrink: group %d's metadata lies past the new end", ErrUnsupported, g)
		}
	}
	return nil
}

// moveBelow copies every block an inode owns at or past end to new blocks
// below it and remaps the inode; the tree, xattr and inode are written at
// the next flush (old blocks are in groups about to be dropped).
func (v *FS) moveBelow(keep uint32, end uint64) error {
	buf := make([]byte, v.bs)
	for g := uint32(0); g < keep; g++ {
		bm, err := v.inodeBitmapOf(g)
		if err != nil {
			return err
		}
		for i := uint32(0); i < v.inodesPerGroup; i++ {
			ino := g*v.inodesPerGroup + i + 1
			if !testBit(bm, i) || ino < v.sb.FirstIno && ino != disk.RootIno && ino != v.sb.JournalInum {
				continue
			}
			in, err := v.getInode(ino)
			if err != nil {
				return err
			}
			if in.d.LinksCount == 0 && ino != v.sb.JournalInum {
				continue
			}
			if in.d.FileACL() >= end {
				if _, err := v.loadXattrs(in); err != nil {
					return err
				}
				in.xattrDirt, in.dirty = true, true
			}
			if !usesBlockData(in) {
				continue
			}
			m, err := v.loadExtents(in)
			if err != nil {
				return err
			}
			for _, b := range m.tree {
				if b >= end {
					m.dirty = true // rewritten below the end at the flush
				}
			}
			var out []disk.Extent
			moved := false
			for _, e := range m.ext {
				if e.Start+uint64(e.Len) <= end {
					out = append(out, e)
					continue
				}
				moved = true
				head := uint32(0)
				if e.Start < end {
					head = uint32(end - e.Start)
					out = append(out, disk.Extent{Block: e.Block, Len: uint16(head), Start: e.Start, Uninit: e.Uninit})
				}
				for done := head; done < uint32(e.Len); {
					start, got, err := v.allocBlocks(0, int(uint32(e.Len)-done))
					if err != nil {
						return fmt.Errorf("shrink: moving inode %d: %w", ino, err)
					}
					if !e.Uninit {
						for k := 0; k < got; k++ {
							if err := v.readBlock(e.Start+uint64(done)+uint64(k), buf); err != nil {
								return err
							}
							if v.isOrphanFile(ino) {
								v.resealOrphanBlock(in, buf, e.Start+uint64(done)+uint64(k), start+uint64(k))
							}
							if err := v.writeBlock(start+uint64(k), buf); err != nil {
								return err
							}
						}
					}
					if ino == v.sb.JournalInum {
						// Freed once the remap is home (Shrink).
						v.movedLog = append(v.movedLog, [2]uint64{e.Start + uint64(done), uint64(got)})
					} else if err := v.freeBlocks(e.Start+uint64(done), uint64(got)); err != nil {
						return err
					}
					out = append(out, disk.Extent{Block: e.Block + done, Len: uint16(got), Start: start, Uninit: e.Uninit})
					done += uint32(got)
				}
			}
			if moved {
				if v.jdev != nil && ino == v.sb.JournalInum && v.jdev.pinned == nil {
					v.jdev.pinned = &extentMap{ext: slices.Clone(m.ext)}
				}
				m.ext = out
				m.dirty, in.dirty = true, true
			}
		}
	}
	return nil
}

// dropGroups forgets the groups from keep on: their metadata blocks that
// lie in kept groups and descriptor blocks no longer needed are freed, and
// the geometry shrinks. With resize_inode (resize, from checkResizeInode)
// the descriptor blocks no longer needed become reserved ones and inode 7
// is rebuilt (shrink_resize.go). It changes memory and staged metadata
// only; the caller flushes, or forgets it all on error.
func (v *FS) dropGroups(keep uint32, resize *inode) error {
	itb := uint64((uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs))
	end := v.groupFirstBlock(keep)
	saved := v.deferFree
	v.deferFree = false
	defer func() { v.deferFree = saved }()
	var dind uint64
	if resize != nil {
		dind = uint64(binary.LittleEndian.Uint32(resize.d.Block[4*disk.DindBlock:]))
		if dind >= end {
			// In a dropped group: take a block below (allocEnd).
			b, _, err := v.allocBlocks(0, 1)
			if err != nil {
				return fmt.Errorf("shrink: moving the resize inode's double-indirect block: %w", err)
			}
			dind = b
		}
	}
	for g := keep; g < v.groupCount; g++ {
		d := v.groups[g].desc
		for _, r := range [][2]uint64{{d.BlockBitmap(), 1}, {d.InodeBitmap(), 1}, {d.InodeTable(), itb}} {
			if r[0] < end {
				if err := v.releaseBlocks(r[0], r[1]); err != nil {
					return err
				}
			}
		}
	}
	oldGdt, oldRes := v.gdtBlocks, uint32(v.sb.ReservedGdtBlocks)
	newGdt := uint32((uint64(keep)*uint64(v.descSize) + uint64(v.bs) - 1) / uint64(v.bs))
	newRes := oldRes
	if resize != nil {
		newRes = v.shrinkReserved(oldGdt, newGdt)
	}
	if freed := oldGdt + oldRes - newGdt - newRes; freed > 0 {
		for g := uint32(0); g < keep; g++ {
			if v.hasSuper(g) {
				if err := v.releaseBlocks(v.groupFirstBlock(g)+1+uint64(newGdt+newRes), uint64(freed)); err != nil {
					return err
				}
			}
		}
	}
	// Keep the root-reserved share of the volume (resize2fs does; e2fsck
	// insists s_r_blocks_count be at most half the volume).
	if r := min(v.sb.RBlocksCount(), v.blocksCount); r > 0 {
		hi, lo := bits.Mul64(r, end)
		q, _ := bits.Div64(hi, lo, v.blocksCount)
		v.sb.SetRBlocksCount(q)
	}
	for i, g := range v.sb.BackupBgs {
		if v.sb.FeatureCompat&disk.CompatSparseSuper2 != 0 && g >= keep {
			v.sb.BackupBgs[i] = 0 // sparse_super2: that backup is dropped
		}
	}
	v.groups = v.groups[:keep]
	v.groupCount = keep
	v.gdtBlocks = newGdt
	v.sb.ReservedGdtBlocks = uint16(newRes)
	v.blocksCount = end
	v.sb.SetBlocksCount(end)
	v.sb.InodesCount = keep * v.inodesPerGroup
	if v.allocCursor >= end {
		v.allocCursor = 0
	}
	for _, gr := range v.groups {
		gr.descDirty = true
	}
	if resize != nil {
		return v.writeResizeInode(resize, dind)
	}
	return nil
}

// refreshJnlBackup copies the journal inode's block map into s_jnl_blocks
// (it moved) and flushes.
func (v *FS) refreshJnlBackup() error {
	if err := v.setJnlBackup(); err != nil {
		return err
	}
	return v.flushMetadata()
}

// setJnlBackup copies the journal inode's block map into s_jnl_blocks, as
// flushed (e2fsck compares them).
func (v *FS) setJnlBackup() error {
	j, err := v.getInode(v.sb.JournalInum)
	if err != nil {
		return err
	}
	for i := 0; i < disk.NBlocks; i++ {
		v.sb.JnlBlocks[i] = uint32(j.d.Block[4*i]) | uint32(j.d.Block[4*i+1])<<8 | uint32(j.d.Block[4*i+2])<<16 | uint32(j.d.Block[4*i+3])<<24
	}
	v.sb.JnlBlocks[15], v.sb.JnlBlocks[16] = j.d.SizeHigh, j.d.SizeLo
	v.groups[0].descDirty = true
	return nil
}
