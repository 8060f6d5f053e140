package ext4lite

// This file holds Check's pass over the superblock, group descriptors,
// block claims and bitmaps.

import (
	"errors"
	"fmt"
	"io"
	"math/bits"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// checkBitmap checks group g's block or inode bitmap b (read from blk):
// its checksum over the first perGroup bits (the descriptor's lo and hi
// halves; only lo with 32-byte descriptors), and that every bit from used
// to the end of the block is set, as mke2fs and the kernel pad it.
func (c *checker) checkBitmap(g uint32, kind string, blk uint64, b []byte, perGroup, used uint32, lo, hi uint16) {
	if c.csum {
		want := disk.CRC32c(c.seed, b[:perGroup/8])
		got := uint32(lo)
		if c.descSize >= disk.GroupDescSize64 {
			got |= uint32(hi) << 16
		} else {
			want &= 0xFFFF
		}
		if got != want {
			c.add(0, blk, "group %d: %s bitmap checksum %#x, computed %#x", g, kind, got, want)
		}
	}
	for i := used; i < uint32(c.bs*8); i++ {
		if b[i/8]&(1<<(i%8)) == 0 {
			c.add(0, blk, "group %d: padding at the end of the %s bitmap is not set (bit %d)", g, kind, i)
			break
		}
	}
}

// superblock reads and validates the primary superblock and derives the
// geometry. Geometry the rest of the check depends on is an error.
func (c *checker) superblock() error {
	raw := make([]byte, disk.SuperblockSize)
	if n, err := c.dev.ReadAt(raw, disk.SuperblockOffset); n != len(raw) {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: file too small to hold a superblock", ErrNotExt4)
		}
		return err
	}
	sb, err := disk.DecodeSuperblock(raw)
	if err != nil {
		return err
	}
	if sb.Magic != disk.Magic {
		return fmt.Errorf("%w: no ext2/3/4 superblock magic at byte 1080", ErrNotExt4)
	}
	c.sb = sb
	if sb.FeatureROCompat&disk.ROCompatMetadataCsum != 0 {
		if sb.ChecksumType != disk.ChecksumCRC32c {
			c.add(0, 0, "superblock: unknown checksum type %d", sb.ChecksumType)
		}
		if got := disk.SuperblockChecksum(raw); got != sb.Checksum {
			c.add(0, 0, "superblock: checksum %#x, computed %#x", sb.Checksum, got)
		}
	}
	if sb.RevLevel < 1 {
		return fmt.Errorf("%w: check of revision 0 (ext2 good-old) filesystems", ErrUnsupported)
	}
	if f := sb.FeatureCompat &^ checkCompat; f != 0 {
		return fmt.Errorf("%w: check of feature(s) %s", ErrUnsupported, disk.FeatureString(f.Names()))
	}
	if f := sb.FeatureIncompat &^ checkIncompat; f != 0 {
		return fmt.Errorf("%w: check of feature(s) %s", ErrUnsupported, disk.FeatureString(f.Names()))
	}
	if f := sb.FeatureROCompat &^ checkROCompat; f != 0 {
		return fmt.Errorf("%w: check of feature(s) %s", ErrUnsupported, disk.FeatureString(f.Names()))
	}
	if sb.FeatureIncompat&disk.IncompatExtents == 0 {
		return fmt.Errorf("%w: check of volumes without extents (ext2/ext3 block maps)", ErrUnsupported)
	}
	g, err := sb.Geometry()
	if err != nil {
		return geometryErr(err, "check of ")
	}
	c.bs, c.blocks, c.fdb = g.BlockSize, g.Blocks, g.FirstDataBlock
	c.bpg, c.ipg, c.isz = g.BlocksPerGroup, g.InodesPerGroup, g.InodeSize
	c.groups, c.descSize, c.gdtBlocks, c.itb = g.Groups, g.DescSize, g.GDTBlocks, g.InodeTableBlocks
	c.csum, c.gdtCsum, c.seed = g.Csum, g.GdtCsum, g.Seed
	if sb.ClustersPerGroup != c.bpg {
		c.add(0, 0, "superblock: %d clusters per group, %d blocks per group", sb.ClustersPerGroup, c.bpg)
	}
	c.hasJournal = sb.FeatureCompat&disk.CompatHasJournal != 0
	c.resizeInode = sb.FeatureCompat&disk.CompatResizeInode != 0
	c.dirIndex = sb.FeatureCompat&disk.CompatDirIndex != 0
	c.filetype = sb.FeatureIncompat&disk.IncompatFiletype != 0
	c.largeDir = sb.FeatureIncompat&disk.IncompatLargedir != 0
	c.flexBG = sb.FeatureIncompat&disk.IncompatFlexBG != 0
	c.extentsFeature = sb.FeatureIncompat&disk.IncompatExtents != 0
	c.dirNlink = sb.FeatureROCompat&disk.ROCompatDirNlink != 0
	c.hugeFile = sb.FeatureROCompat&disk.ROCompatHugeFile != 0
	c.orphanFileSuper()

	if sb.FeatureIncompat&disk.IncompatRecover != 0 && !c.replayed {
		c.add(0, 0, "superblock: the journal needs recovery (needs_recovery)")
	}
	if sb.RBlocksCount() > c.blocks {
		c.add(0, 0, "superblock: %d reserved blocks of %d", sb.RBlocksCount(), c.blocks)
	}
	if c.isz > disk.GoodOldInodeSize {
		max := uint16(c.isz - disk.GoodOldInodeSize)
		if sb.MinExtraIsize > max || sb.WantExtraIsize > max {
			c.add(0, 0, "superblock: extra inode sizes %d/%d exceed %d", sb.MinExtraIsize, sb.WantExtraIsize, max)
		}
	}
	if c.dirIndex && sb.DefHashVersion > disk.HashTea && sb.DefHashVersion != disk.HashSiphash {
		c.add(0, 0, "superblock: default directory hash version %d", sb.DefHashVersion)
	}
	// The device must hold every block, or the rest would read past it.
	last := make([]byte, c.bs)
	if n, err := c.dev.ReadAt(last, int64(c.blocks-1)*int64(c.bs)); n != len(last) {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			c.add(0, c.blocks-1, "the filesystem has %d blocks but the device is shorter", c.blocks)
			c.stop = true
			return nil
		}
		return err
	}
	c.budget = 2*int64(c.blocks) + 1<<16
	return nil
}

func (c *checker) groupFirst(g uint32) uint64 { return c.fdb + uint64(g)*uint64(c.bpg) }

func (c *checker) groupBlocks(g uint32) uint32 {
	if g == c.groups-1 {
		return uint32(c.blocks - c.groupFirst(g))
	}
	return c.bpg
}

// claim marks n blocks from blk in use by owner; blocks outside the
// filesystem or already claimed are findings. It reports whether every
// block was free to claim.
func (c *checker) claim(blk, n uint64, ino uint32, what string) bool {
	if n == 0 {
		return true
	}
	if blk < c.fdb || blk >= c.blocks || n > c.blocks-blk {
		c.add(ino, blk, "%s: %d block(s) outside the filesystem (%d..%d)", what, n, c.fdb, c.blocks-1)
		return false
	}
	c.budget -= int64(n)
	if c.budget < 0 {
		if !c.stop {
			c.add(ino, blk, "too many overlapping block claims; check stopped")
		}
		c.stop = true
		return false
	}
	ok := true
	dups := 0
	var firstDup uint64
	for i := uint64(0); i < n; i++ {
		b := blk + i - c.fdb
		g, bit := uint32(b/uint64(c.bpg)), uint32(b%uint64(c.bpg))
		m := c.claimed[g]
		if m[bit/8]&(1<<(bit%8)) != 0 {
			if dups == 0 {
				firstDup = blk + i
			}
			dups++
			ok = false
			continue
		}
		m[bit/8] |= 1 << (bit % 8)
	}
	if dups > 0 {
		c.add(ino, firstDup, "%s: %d block(s) from here already in use by other metadata or another inode", what, dups)
	}
	return ok
}

// groupDescs checks every descriptor, claims each group's metadata, and
// returns the on-disk (or, for uninitialized groups, implied) bitmaps.
func (c *checker) groupDescs() (bbs, ibs [][]byte) {
	gdtOff := int64(c.fdb+1) * int64(c.bs)
	raw := make([]byte, c.descSize)
	c.gds = make([]*disk.GroupDesc, c.groups)
	valid := make([]bool, c.groups)
	for g := uint32(0); g < c.groups && !c.stop; g++ {
		off := gdtOff + int64(g)*int64(c.descSize)
		if !c.read(raw, off, 0, fmt.Sprintf("group %d descriptor", g)) {
			c.stop = true
			return
		}
		gd := disk.DecodeGroupDesc(raw, c.descSize)
		c.gds[g] = gd
		switch {
		case c.csum:
			if want := disk.GroupDescChecksum(c.seed, g, raw); want != gd.Checksum {
				c.add(0, 0, "group %d: descriptor checksum %#x, computed %#x", g, gd.Checksum, want)
			}
		case c.gdtCsum:
			if want := disk.GroupDescChecksumCrc16(c.sb.UUID, g, raw); want != gd.Checksum {
				c.add(0, 0, "group %d: descriptor checksum %#x, computed %#x", g, gd.Checksum, want)
			}
		}
		if gd.Flags&(disk.BGInodeUninit|disk.BGBlockUninit) != 0 && !c.csum && !c.gdtCsum {
			c.add(0, 0, "group %d: uninitialized flags %#x without a checksum feature", g, gd.Flags)
		}
		if gd.Flags&disk.BGBlockUninit != 0 && g == c.groups-1 && (c.csum || c.gdtCsum) {
			c.add(0, 0, "group %d: the last group's block bitmap is marked uninitialized", g)
		}
		first, end := c.groupFirst(g), c.groupFirst(g)+uint64(c.groupBlocks(g))
		if c.flexBG {
			first, end = c.fdb, c.blocks
		}
		valid[g] = true
		for _, l := range []struct {
			what string
			blk  uint64
			n    uint64
		}{{"block bitmap", gd.BlockBitmap(), 1}, {"inode bitmap", gd.InodeBitmap(), 1}, {"inode table", gd.InodeTable(), c.itb}} {
			if l.blk < first || l.blk >= end || l.n > end-l.blk {
				c.add(0, l.blk, "group %d: %s outside its allowed range %d..%d", g, l.what, first, end-1)
				valid[g] = false
			}
		}
	}
	// Metadata claims: superblock copies and descriptor tables, bitmaps,
	// inode tables.
	for g := uint32(0); g < c.groups && !c.stop; g++ {
		if c.sb.HasSuperBackup(g) {
			n := 1 + uint64(c.gdtBlocks) + uint64(c.sb.ReservedGdtBlocks)
			c.claim(c.groupFirst(g), min(n, uint64(c.groupBlocks(g))), 0, fmt.Sprintf("group %d superblock and descriptors", g))
		}
		if valid[g] {
			gd := c.gds[g]
			c.claim(gd.BlockBitmap(), 1, 0, fmt.Sprintf("group %d block bitmap", g))
			c.claim(gd.InodeBitmap(), 1, 0, fmt.Sprintf("group %d inode bitmap", g))
			c.claim(gd.InodeTable(), c.itb, 0, fmt.Sprintf("group %d inode table", g))
		}
	}
	if c.stop {
		return
	}
	bbs, ibs = make([][]byte, c.groups), make([][]byte, c.groups)
	for g := uint32(0); g < c.groups && !c.stop; g++ {
		gd := c.gds[g]
		uninitOK := c.csum || c.gdtCsum
		bb := make([]byte, c.bs)
		switch {
		case gd.Flags&disk.BGBlockUninit != 0 && uninitOK:
			// The kernel computes it: the group's metadata only (what was
			// claimed so far) plus padding.
			copy(bb, c.claimed[g])
			for i := c.groupBlocks(g); i < uint32(c.bs*8); i++ {
				bb[i/8] |= 1 << (i % 8)
			}
		case !valid[g]:
			bb = nil
		case c.readBlock(gd.BlockBitmap(), bb, 0, fmt.Sprintf("group %d block bitmap", g)):
			c.checkBitmap(g, "block", gd.BlockBitmap(), bb, c.bpg, c.groupBlocks(g), gd.BlockBitmapCsumLo, gd.BlockBitmapCsumHi)
		default:
			bb = nil
		}
		bbs[g] = bb

		ib := make([]byte, c.bs)
		switch {
		case gd.Flags&disk.BGInodeUninit != 0 && uninitOK:
			for i := c.ipg; i < uint32(c.bs*8); i++ {
				ib[i/8] |= 1 << (i % 8)
			}
		case !valid[g]:
			ib = nil
		case c.readBlock(gd.InodeBitmap(), ib, 0, fmt.Sprintf("group %d inode bitmap", g)):
			c.checkBitmap(g, "inode", gd.InodeBitmap(), ib, c.ipg, c.ipg, gd.InodeBitmapCsumLo, gd.InodeBitmapCsumHi)
		default:
			ib = nil
		}
		ibs[g] = ib
	}
	return bbs, ibs
}

// bitmaps compares the on-disk bitmaps and counts with what is in use.
func (c *checker) bitmaps(bbs, ibs [][]byte) {
	var freeBlocks uint64
	var freeInodes uint32
	used := make([]byte, (c.ipg+7)/8)
	for g := uint32(0); g < c.groups; g++ {
		gd := c.gds[g]
		n := c.groupBlocks(g)
		claimed := c.claimed[g]
		inUse := uint32(0)
		for i := uint32(0); i < n; i++ {
			if claimed[i/8]&(1<<(i%8)) != 0 {
				inUse++
			}
		}
		freeBlocks += uint64(n - inUse)
		if bb := bbs[g]; bb != nil {
			c.diffBitmap(g, "block", bb, claimed, n, c.groupFirst(g))
		}
		if got := gd.FreeBlocks(); got != n-inUse {
			c.add(0, 0, "group %d: free blocks count %d, counted %d", g, got, n-inUse)
		}
		// Inodes in use in this group, by the check's own account.
		clear(used)
		dirs, highest := uint32(0), uint32(0)
		for i := uint32(0); i < c.ipg; i++ {
			ino := g*c.ipg + i + 1
			ci := c.inodes[ino]
			if ci == nil && ino >= c.sb.FirstIno {
				continue
			}
			used[i/8] |= 1 << (i % 8)
			highest = i + 1
			if ci != nil && ci.mode&disk.ModeTypeMask == disk.ModeDir && (ino >= c.sb.FirstIno || ino == disk.RootIno) {
				dirs++
			}
		}
		count := uint32(0)
		for i := uint32(0); i < c.ipg; i++ {
			if used[i/8]&(1<<(i%8)) != 0 {
				count++
			}
		}
		freeInodes += c.ipg - count
		if ib := ibs[g]; ib != nil {
			c.diffBitmap(g, "inode", ib, used, c.ipg, uint64(g)*uint64(c.ipg)+1)
		}
		if got := gd.FreeInodes(); got != c.ipg-count {
			c.add(0, 0, "group %d: free inodes count %d, counted %d", g, got, c.ipg-count)
		}
		if got := gd.UsedDirs(); got != dirs {
			c.add(0, 0, "group %d: directories count %d, counted %d", g, got, dirs)
		}
		if c.csum || c.gdtCsum {
			if u := gd.ItableUnused(); u <= c.ipg && highest > c.ipg-u {
				c.add(0, 0, "group %d: inode %d in use past the %d initialized inodes", g, g*c.ipg+highest, c.ipg-u)
			}
			if gd.Flags&disk.BGInodeUninit != 0 && count > 0 {
				c.add(0, 0, "group %d: %d inodes in use in an uninitialized inode table", g, count)
			}
		}
	}
	if got := c.sb.FreeBlocksCount(); c.sb.FeatureIncompat&disk.Incompat64bit == 0 {
		got = uint64(c.sb.FreeBlocksCountLo)
		if got != freeBlocks {
			c.add(0, 0, "superblock: free blocks count %d, counted %d", got, freeBlocks)
		}
	} else if got != freeBlocks {
		c.add(0, 0, "superblock: free blocks count %d, counted %d", got, freeBlocks)
	}
	if got := c.sb.FreeInodesCount; got != freeInodes {
		c.add(0, 0, "superblock: free inodes count %d, counted %d", got, freeInodes)
	}
	c.rep.Free = freeBlocks
	c.rep.Blocks = c.blocks - freeBlocks // as e2fsck counts: block 0 of a 1 KiB volume too
	c.rep.Inodes = c.sb.InodesCount - freeInodes
}

// diffBitmap reports where an on-disk bitmap of n bits differs from the
// computed one, listing the first few differences.
func (c *checker) diffBitmap(g uint32, what string, have, want []byte, n uint32, base uint64) {
	var plus, minus []uint64
	count := 0
	for i := uint32(0); i < n; i += 8 {
		x := have[i/8] ^ want[i/8]
		if i+8 > n {
			x &= byte(1<<(n-i)) - 1
		}
		for x != 0 {
			j := uint32(bits.TrailingZeros8(x))
			x &^= 1 << j
			count++
			k := i + j
			if want[k/8]&(1<<(k%8)) != 0 {
				if len(plus) < 5 {
					plus = append(plus, base+uint64(k))
				}
			} else if len(minus) < 5 {
				minus = append(minus, base+uint64(k))
			}
		}
	}
	if count > 0 {
		c.add(0, 0, "group %d: %d %s bitmap difference(s): in use but marked free %v, marked in use but free %v", g, count, what, plus, minus)
	}
}
