package ext4lite

// This file holds Check's pass over each in-use inode — type, sizes, times,
// extent tree, symlinks, devices, the bad-blocks and resize inodes.

import (
	"encoding/binary"
	"fmt"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// scanInodes reads each group's used part of the inode table and checks
// every inode in use.
func (c *checker) scanInodes(ibs [][]byte) {
	for g := uint32(0); g < c.groups && !c.stop; g++ {
		gd := c.gds[g]
		if ibs[g] == nil {
			continue // descriptor invalid: already a finding
		}
		if gd.Flags&disk.BGInodeUninit != 0 && (c.csum || c.gdtCsum) {
			continue
		}
		limit := c.ipg
		if c.csum || c.gdtCsum {
			if u := gd.ItableUnused(); u > c.ipg {
				c.add(0, 0, "group %d: %d unused inodes of %d", g, u, c.ipg)
			} else {
				limit = c.ipg - u
			}
		}
		const chunk = 64 << 10
		perChunk := uint32(chunk / c.isz)
		buf := make([]byte, chunk)
		for start := uint32(0); start < limit && !c.stop; start += perChunk {
			n := min(perChunk, limit-start)
			p := buf[:int(n)*c.isz]
			off := int64(gd.InodeTable())*int64(c.bs) + int64(start)*int64(c.isz)
			if !c.read(p, off, 0, fmt.Sprintf("group %d inode table", g)) {
				break
			}
			for i := uint32(0); i < n && !c.stop; i++ {
				ino := g*c.ipg + start + i + 1
				if c.isOrphanFile(ino) {
					continue // checked before the scan (orphanFileInode)
				}
				c.inode(ino, p[int(i)*c.isz:int(i+1)*c.isz])
			}
		}
	}
	if c.inodes[disk.RootIno] == nil {
		c.add(disk.RootIno, 0, "the root directory is not in use")
	} else if c.inodes[disk.RootIno].mode&disk.ModeTypeMask != disk.ModeDir {
		c.add(disk.RootIno, 0, "the root inode is not a directory")
	}
}

// inode checks one inode slot.
func (c *checker) inode(ino uint32, slot []byte) {
	in := disk.DecodeInode(slot)
	reserved := ino < c.sb.FirstIno
	// Like e2fsck, every initialized slot that is not all zeros must carry
	// a valid checksum, in use or not.
	if c.csum && !isZero(slot) && !disk.VerifyInodeChecksum(c.seed, ino, slot) {
		state := "unused inode"
		if in.LinksCount != 0 || reserved {
			state = "inode"
		}
		c.add(ino, 0, "%s checksum mismatch", state)
	}
	switch {
	case reserved && ino == disk.RootIno:
	case reserved && c.hasJournal && ino == c.sb.JournalInum:
	case reserved && c.resizeInode && ino == 7:
		c.resize(ino, in)
		return
	case ino == disk.BadBlocksIno:
		c.inodes[ino] = &cInode{mode: in.Mode, links: in.LinksCount}
		c.badBlocks(ino, in)
		return
	case reserved:
		c.inodes[ino] = &cInode{mode: in.Mode, links: in.LinksCount}
		return
	case in.LinksCount == 0 && !c.orphans[ino]:
		return // free (pass 5 compares with the bitmap)
	}
	ci := &cInode{mode: in.Mode, links: in.LinksCount, flags: in.Flags, gen: in.Generation, size: in.Size()}
	c.inodes[ino] = ci
	if c.isz > disk.GoodOldInodeSize {
		e := int(in.ExtraIsize)
		if e != 0 && (e < 4 || e > c.isz-disk.GoodOldInodeSize || e%4 != 0) {
			c.add(ino, 0, "i_extra_isize %d", e)
		}
	}
	if in.Dtime != 0 && in.LinksCount != 0 && !reserved && !c.orphans[ino] {
		c.add(ino, 0, "in use (%d links) but deletion time is set", in.LinksCount)
	}
	typ := uint32(in.Mode) & disk.ModeTypeMask
	if disk.FileTypeOfMode(in.Mode) == disk.FtUnknown {
		c.add(ino, 0, "bad file type in mode %#o", in.Mode)
		return
	}
	for _, f := range []struct {
		flag uint32
		ok   bool
		name string
	}{
		{disk.FlagInlineData, false, "inline data"},
		{disk.FlagEncrypt, false, "encrypt"},
		{disk.FlagCasefold, false, "casefold"},
		{disk.FlagVerity, false, "verity"},
		{disk.FlagEAInode, false, "ea_inode"},
		{disk.FlagHugeFile, c.hugeFile, "huge_file"},
		{disk.FlagExtents, c.extentsFeature, "extents"},
		{disk.FlagIndex, typ == disk.ModeDir && c.dirIndex, "htree index"},
	} {
		if in.Flags&f.flag != 0 && !f.ok {
			c.add(ino, 0, "%s flag (%#x) set on a %s, not supported here", f.name, f.flag, typeWord(typ))
		}
	}
	var used uint64 // blocks owned: data, tree, xattr
	switch typ {
	case disk.ModeReg, disk.ModeDir:
		used += c.fileBlocks(ino, in, ci)
	case disk.ModeSymlink:
		used += c.symlink(ino, in, ci)
	default:
		c.special(ino, in, typ)
	}
	used += c.inodeXattrs(ino, in, slot)
	if want, got := used*uint64(c.bs/512), in.Blocks(c.bs); want != got {
		c.add(ino, 0, "i_blocks is %d, should be %d", got, want)
	}
}

// typeWord names an inode's file type (disk.Mode* are st_mode's S_IFMT
// values, as sink's types).
func typeWord(typ uint32) string { return sink.TypeName(typ) }

// resize claims the resize inode's double-indirect block (its other
// blocks are the reserved descriptor blocks, claimed as group metadata).
func (c *checker) resize(ino uint32, in *disk.Inode) {
	c.inodes[ino] = &cInode{mode: in.Mode, links: in.LinksCount}
	dind := uint64(binary.LittleEndian.Uint32(in.Block[13*4:]))
	if dind == 0 {
		if c.sb.ReservedGdtBlocks != 0 {
			c.add(ino, 0, "resize inode has no double-indirect block")
		}
		return
	}
	c.claim(dind, 1, ino, "resize inode double-indirect block")
}

// fileBlocks checks a regular file's or directory's extent tree and size;
// it returns the blocks the tree maps and uses.
func (c *checker) fileBlocks(ino uint32, in *disk.Inode, ci *cInode) uint64 {
	typ := uint32(in.Mode) & disk.ModeTypeMask
	if in.Flags&disk.FlagExtents == 0 {
		switch {
		case !isZero(in.Block[:]):
			c.add(ino, 0, "%s without an extent tree (block maps are not supported)", typeWord(typ))
		case typ == disk.ModeDir:
			c.add(ino, 0, "directory has no blocks")
		}
		return 0 // a block map without blocks: an empty or all-hole file
	}
	w := c.extents(ino, in)
	if c.isJournal(ino) || c.isOrphanFile(ino) {
		ci.ext, ci.extOK = w.ext, w.ok
	}
	if typ == disk.ModeDir {
		ci.ext, ci.extOK = w.ext, w.ok
		if in.SizeHigh != 0 && !c.largeDir {
			// e2fsck pass 2: "i_size_high for inode N is M, should be zero".
			c.add(ino, 0, "directory i_size_high is %#x, should be zero without large_dir", in.SizeHigh)
		}
		c.dirSize(ino, in, w)
		return w.data + w.tree
	}
	if max := disk.MaxExtentISize(c.bs); in.Size() > max {
		c.add(ino, 0, "i_size %d is past the largest an extent-mapped file can have (%d)", in.Size(), max)
	} else if w.lastInit > 0 {
		if sizeBlocks := (in.Size() + uint64(c.bs) - 1) / uint64(c.bs); w.lastInit > sizeBlocks {
			c.add(ino, 0, "i_size is %d but block %d is mapped", in.Size(), w.lastInit-1)
		}
	}
	return w.data + w.tree
}

// dirSize checks a directory's size against its mapping: no holes, no
// unwritten extents, size = mapped blocks.
func (c *checker) dirSize(ino uint32, in *disk.Inode, w *extentWalk) {
	size := in.Size()
	if size%uint64(c.bs) != 0 {
		c.add(ino, 0, "directory size %d is not a multiple of the block size", size)
	}
	if !w.ok {
		return
	}
	next := uint64(0)
	for _, e := range w.ext {
		if uint64(e.Block) != next {
			c.add(ino, 0, "directory has a hole at block %d", next)
			return
		}
		if e.Uninit {
			c.add(ino, 0, "directory has an unwritten extent at block %d", e.Block)
			return
		}
		next = uint64(e.Block) + uint64(e.Len)
	}
	if n := size / uint64(c.bs); n != next {
		c.add(ino, 0, "directory size %d (%d blocks), but %d blocks are mapped", size, n, next)
	}
	if next == 0 {
		c.add(ino, 0, "directory has no blocks")
	}
}

// extentWalk is the result of walking one inode's extent tree.
type extentWalk struct {
	ext      []disk.Extent
	data     uint64 // mapped blocks (claimed)
	tree     uint64 // index/leaf blocks
	lastInit uint64 // logical end of the last initialized extent
	ok       bool   // the tree parsed without structural damage
	keep     bool
}

func (c *checker) extents(ino uint32, in *disk.Inode) *extentWalk {
	typ := uint32(in.Mode) & disk.ModeTypeMask
	w := &extentWalk{ok: true, keep: typ == disk.ModeDir || typ == disk.ModeSymlink || c.isJournal(ino) || c.isOrphanFile(ino)}
	seed := disk.InodeSeed(c.seed, ino, in.Generation)
	c.extentNode(ino, seed, in.Block[:], 0, -1, 0, 1<<32, w)
	return w
}

// extentNode checks one tree node (the root in i_block when blk is 0)
// with decodeExtentNode, the reader's rules; logical blocks below it must
// lie in [lo, hi). Every leaf extent and tree block is claimed.
func (c *checker) extentNode(ino, seed uint32, node []byte, blk uint64, depth int, lo, hi uint64, w *extentWalk) {
	if c.stop {
		return
	}
	n := decodeExtentNode(node, blk, depth, lo, hi, c.csum, seed)
	for _, p := range append(n.problems, n.findings...) {
		c.add(ino, blk, "%s", p)
		w.ok = false
	}
	if n.fatal {
		return
	}
	for _, e := range n.extents {
		if !c.claim(e.Start, uint64(e.Len), ino, fmt.Sprintf("extent %d+%d", e.Block, e.Len)) {
			w.ok = false
		}
		w.data += uint64(e.Len)
		if end := uint64(e.Block) + uint64(e.Len); !e.Uninit {
			w.lastInit = max(w.lastInit, end)
		}
		if w.keep {
			w.ext = append(w.ext, e)
		}
	}
	child := make([]byte, c.bs)
	for _, ch := range n.children {
		if c.stop {
			return
		}
		// A block already claimed is never descended into: that bounds the
		// walk of a tree whose nodes point at each other.
		if !c.claim(ch.leaf, 1, ino, "extent tree block") {
			w.ok = false
			continue
		}
		w.tree++
		if !c.readBlock(ch.leaf, child, ino, "extent tree block") {
			w.ok = false
			return
		}
		c.extentNode(ino, seed, child, ch.leaf, int(n.h.Depth)-1, ch.lo, ch.hi, w)
	}
}

// symlink checks a fast or slow symlink; it returns its data blocks.
func (c *checker) symlink(ino uint32, in *disk.Inode, ci *cInode) uint64 {
	size := in.Size()
	if size == 0 {
		c.add(ino, 0, "symlink of size 0")
		return 0
	}
	if size < uint64(len(in.Block)) {
		if in.Flags&disk.FlagExtents != 0 {
			c.add(ino, 0, "fast symlink (%d bytes) with an extent tree", size)
			w := c.extents(ino, in)
			return w.data + w.tree
		}
		if n := strnlen(in.Block[:]); uint64(n) != size {
			c.add(ino, 0, "fast symlink target is %d bytes, i_size %d", n, size)
		}
		return 0
	}
	if size >= uint64(c.bs) {
		c.add(ino, 0, "symlink of %d bytes (block size %d)", size, c.bs)
	}
	if in.Flags&disk.FlagExtents == 0 {
		c.add(ino, 0, "slow symlink without an extent tree")
		return 0
	}
	w := c.extents(ino, in)
	ci.ext, ci.extOK = w.ext, w.ok
	if !w.ok {
		return w.data + w.tree
	}
	if len(w.ext) != 1 || w.ext[0].Block != 0 || w.ext[0].Len != 1 || w.ext[0].Uninit {
		c.add(ino, 0, "slow symlink maps %d extents, want one block at 0", len(w.ext))
		return w.data + w.tree
	}
	b := make([]byte, c.bs)
	if c.readBlock(w.ext[0].Start, b, ino, "symlink block") && size < uint64(c.bs) {
		if n := strnlen(b); uint64(n) != size {
			c.add(ino, w.ext[0].Start, "symlink target is %d bytes, i_size %d", n, size)
		}
	}
	return w.data + w.tree
}

func strnlen(b []byte) int {
	for i, x := range b {
		if x == 0 {
			return i
		}
	}
	return len(b)
}

// special checks devices, fifos and sockets: no tree, a sane encoding.
func (c *checker) special(ino uint32, in *disk.Inode, typ uint32) {
	if in.Flags&(disk.FlagExtents|disk.FlagIndex) != 0 {
		c.add(ino, 0, "%s with extent or index flags (%#x)", typeWord(typ), in.Flags)
	}
	if in.Size() != 0 {
		// e2fsck pass 1: "Special (device/socket/fifo) inode N has non-zero size".
		c.add(ino, 0, "%s has i_size %d, should be zero", typeWord(typ), in.Size())
	}
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(in.Block[4*i:]) }
	switch typ {
	case disk.ModeChar, disk.ModeBlock:
		if w(0) != 0 && w(1) != 0 {
			c.add(ino, 0, "%s holds both the old and new device encodings", typeWord(typ))
		}
		for i := 2; i < disk.NBlocks; i++ {
			if w(i) != 0 {
				c.add(ino, 0, "%s has i_block[%d] = %#x past its device number", typeWord(typ), i, w(i))
				break
			}
		}
	}
}

// badBlocks claims the blocks the bad-blocks inode lists, and the
// indirect blocks that list them (it has a block map, never an extent
// tree): e2fsck counts them in use, so a block both listed bad and owned
// by a file is claimed twice. Each indirect block is claimed before it is
// read, which bounds the walk.
func (c *checker) badBlocks(ino uint32, in *disk.Inode) {
	if in.Flags&disk.FlagExtents != 0 {
		c.add(ino, 0, "the bad blocks inode has the extents flag")
		return
	}
	w := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(in.Block[4*i:])) }
	for i := 0; i < 12; i++ {
		if b := w(i); b != 0 {
			c.claim(b, 1, ino, "bad blocks list entry")
		}
	}
	for level, i := range []int{12, 13, 14} {
		c.badBlocksIndirect(ino, w(i), level)
	}
}

func (c *checker) badBlocksIndirect(ino uint32, blk uint64, level int) {
	if blk == 0 || c.stop || !c.claim(blk, 1, ino, "bad blocks indirect block") {
		return
	}
	b := make([]byte, c.bs)
	if !c.readBlock(blk, b, ino, "bad blocks indirect block") {
		return
	}
	for i := 0; i+4 <= len(b) && !c.stop; i += 4 {
		switch p := uint64(binary.LittleEndian.Uint32(b[i:])); {
		case p == 0:
		case level == 0:
			c.claim(p, 1, ino, "bad blocks list entry")
		default:
			c.badBlocksIndirect(ino, p, level-1)
		}
	}
}
