package ext4lite

import (
	"fmt"
	"math/bits"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// allocBlocks allocates up to want contiguous blocks, starting the search
// at goal. It returns the first block and how many it got (at least 1).
func (v *FS) allocBlocks(goal uint64, want int) (uint64, int, error) {
	if want <= 0 {
		want = 1
	}
	if goal < v.firstDataBlock || goal >= v.blocksCount {
		goal = v.allocCursor
		if goal < v.firstDataBlock || goal >= v.blocksCount {
			goal = v.firstDataBlock
		}
	}
	// The goal's group is visited twice: from the goal on first, from its
	// start last, so files keep growing forward while space remains.
	g0 := uint32((goal - v.firstDataBlock) / uint64(v.blocksPerGroup))
	for i := uint32(0); i <= v.groupCount; i++ {
		g := (g0 + i) % v.groupCount
		gr := v.groups[g]
		if gr.desc.FreeBlocks() == 0 || v.allocEnd != 0 && v.groupFirstBlock(g) >= v.allocEnd {
			continue
		}
		bm, err := v.blockBitmapOf(g)
		if err != nil {
			return 0, 0, err
		}
		start := uint32(0)
		if i == 0 {
			start = uint32((goal - v.firstDataBlock) % uint64(v.blocksPerGroup))
		}
		n := v.groupBlocks(g)
		bit, ok := findZero(bm, start, n)
		if !ok {
			continue
		}
		run := 1
		for run < want && bit+uint32(run) < n && !testBit(bm, bit+uint32(run)) {
			run++
		}
		for j := 0; j < run; j++ {
			setBit(bm, bit+uint32(j))
		}
		gr.desc.SetFreeBlocks(gr.desc.FreeBlocks() - uint32(run))
		gr.bbDirty = true
		blk := v.groupFirstBlock(g) + uint64(bit)
		v.allocCursor = blk + uint64(run)
		return blk, run, nil
	}
	return 0, 0, fmt.Errorf("%w (%d blocks of %d bytes, all in use)", ErrNoSpace, v.blocksCount, v.bs)
}

// findZero finds the first clear bit in bm[from:n).
func findZero(bm []byte, from, n uint32) (uint32, bool) {
	i := from
	for i < n && i%64 != 0 {
		if !testBit(bm, i) {
			return i, true
		}
		i++
	}
	for ; i+64 <= n; i += 64 {
		w := uint64(bm[i/8]) | uint64(bm[i/8+1])<<8 | uint64(bm[i/8+2])<<16 | uint64(bm[i/8+3])<<24 |
			uint64(bm[i/8+4])<<32 | uint64(bm[i/8+5])<<40 | uint64(bm[i/8+6])<<48 | uint64(bm[i/8+7])<<56
		if w != ^uint64(0) {
			return i + uint32(bits.TrailingZeros64(^w)), true
		}
	}
	for ; i < n; i++ {
		if !testBit(bm, i) {
			return i, true
		}
	}
	return 0, false
}

// freeBlocks returns n blocks starting at blk to the free pool: at the
// next commit when journaling (see journal.go), else now.
func (v *FS) freeBlocks(blk uint64, n uint64) error {
	if v.deferFree {
		if blk < v.firstDataBlock || blk+n > v.blocksCount {
			return corruptf(-1, 0, "freeing blocks %d+%d outside the filesystem", blk, n)
		}
		v.pendingFree = append(v.pendingFree, [2]uint64{blk, n})
		return nil
	}
	return v.releaseBlocks(blk, n)
}

// applyPendingFrees releases the blocks freed since the last commit.
func (v *FS) applyPendingFrees() error {
	for _, r := range v.pendingFree {
		if err := v.releaseBlocks(r[0], r[1]); err != nil {
			return err
		}
	}
	v.pendingFree = v.pendingFree[:0]
	return nil
}

// releaseBlocks clears n blocks starting at blk in the bitmaps.
func (v *FS) releaseBlocks(blk uint64, n uint64) error {
	for n > 0 {
		if blk < v.firstDataBlock || blk >= v.blocksCount {
			return corruptf(-1, 0, "freeing block %d outside the filesystem", blk)
		}
		g := uint32((blk - v.firstDataBlock) / uint64(v.blocksPerGroup))
		bm, err := v.blockBitmapOf(g)
		if err != nil {
			return err
		}
		gr := v.groups[g]
		off := uint32((blk - v.firstDataBlock) % uint64(v.blocksPerGroup))
		cnt := min(uint64(v.groupBlocks(g)-off), n)
		for j := uint32(0); j < uint32(cnt); j++ {
			if !testBit(bm, off+j) {
				return corruptf(-1, 0, "block %d freed twice", blk+uint64(j))
			}
			clearBit(bm, off+j)
		}
		gr.desc.SetFreeBlocks(gr.desc.FreeBlocks() + uint32(cnt))
		gr.bbDirty = true
		blk += cnt
		n -= cnt
	}
	return nil
}

// allocInode allocates an inode number; dir tells whether it will be a
// directory (for bg_used_dirs_count).
func (v *FS) allocInode(dir bool) (uint32, error) {
	for i := uint32(0); i < v.groupCount; i++ {
		g := (v.inodeCursor + i) % v.groupCount
		gr := v.groups[g]
		if gr.desc.FreeInodes() == 0 {
			continue
		}
		bm, err := v.inodeBitmapOf(g)
		if err != nil {
			return 0, err
		}
		start := uint32(0)
		if g == 0 {
			start = v.sb.FirstIno - 1
		}
		bit, ok := findZero(bm, start, v.inodesPerGroup)
		if !ok {
			continue
		}
		setBit(bm, bit)
		gr.desc.SetFreeInodes(gr.desc.FreeInodes() - 1)
		if dir {
			gr.desc.SetUsedDirs(gr.desc.UsedDirs() + 1)
		}
		if used := v.inodesPerGroup - gr.desc.ItableUnused(); bit+1 > used && (v.csum || v.gdtCsum) {
			gr.desc.SetItableUnused(v.inodesPerGroup - bit - 1)
		}
		gr.desc.Flags &^= disk.BGInodeUninit
		gr.ibDirty = true
		v.inodeCursor = g
		return g*v.inodesPerGroup + bit + 1, nil
	}
	return 0, fmt.Errorf("%w (all %d inodes in use)", ErrNoSpace, v.sb.InodesCount)
}

// freeInode returns ino to the free pool.
func (v *FS) freeInode(ino uint32, dir bool) error {
	g, bit := (ino-1)/v.inodesPerGroup, (ino-1)%v.inodesPerGroup
	bm, err := v.inodeBitmapOf(g)
	if err != nil {
		return err
	}
	if !testBit(bm, bit) {
		return corruptf(-1, ino, "inode freed twice")
	}
	clearBit(bm, bit)
	gr := v.groups[g]
	gr.desc.SetFreeInodes(gr.desc.FreeInodes() + 1)
	if dir && gr.desc.UsedDirs() > 0 {
		gr.desc.SetUsedDirs(gr.desc.UsedDirs() - 1)
	}
	gr.ibDirty = true
	return nil
}

// inodeInUse reports whether ino is marked in its group's bitmap.
func (v *FS) inodeInUse(ino uint32) (bool, error) {
	g, bit := (ino-1)/v.inodesPerGroup, (ino-1)%v.inodesPerGroup
	bm, err := v.inodeBitmapOf(g)
	if err != nil {
		return false, err
	}
	return testBit(bm, bit), nil
}
