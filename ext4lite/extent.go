package ext4lite

import (
	"fmt"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// extentMap is an inode's logical→physical mapping, held flat in memory
// and written back as a fresh extent tree when it changed.
type extentMap struct {
	ext   []disk.Extent // sorted by Block, non-overlapping
	tree  []uint64      // blocks the on-disk tree uses (index and leaf blocks)
	dirty bool
}

// loadExtents reads in's extent tree (validating every node).
func (v *FS) loadExtents(in *inode) (*extentMap, error) {
	if in.ext != nil {
		return in.ext, nil
	}
	m := &extentMap{}
	if in.d.Flags&disk.FlagExtents == 0 {
		if in.d.Flags&disk.FlagInlineData != 0 {
			return nil, corruptf(-1, in.ino, "inline data is not supported")
		}
		return nil, fmt.Errorf("inode %d: %w: indirect block maps (ext2/ext3 files)", in.ino, ErrUnsupported)
	}
	w := &extentWalker{v: v, in: in, m: m, seen: map[uint64]bool{},
		maxNodes: v.opts.maxExtentNodes(), maxExtents: v.opts.maxExtents()}
	if err := w.node(in.d.Block[:], 0, -1, 0, 1<<32); err != nil {
		return nil, err
	}
	for i := 1; i < len(m.ext); i++ {
		p := m.ext[i-1]
		if uint64(p.Block)+uint64(p.Len) > uint64(m.ext[i].Block) {
			return nil, corruptf(-1, in.ino, "overlapping extents at logical block %d", m.ext[i].Block)
		}
	}
	in.ext = m
	return m, nil
}

// extentWalker walks one inode's extent tree with bounds and a budget:
// every entry's logical range lies inside its parent's [lo, hi) and after
// its left sibling, depth decreases by one per level, each tree block is
// read once (a tree whose index entries point back into the tree is
// refused, not expanded), and at most maxNodes tree blocks and maxExtents
// leaf entries are taken. Each node's rules are decodeExtentNode's, which
// Check applies too, so a tree Check calls clean always loads.
type extentWalker struct {
	v                    *FS
	in                   *inode
	m                    *extentMap
	seen                 map[uint64]bool
	nodes                int
	maxNodes, maxExtents int
}

// node collects the leaves below node (i_block when blk is 0); depth is
// the depth its parent expects (-1 for the root) and [lo, hi) the logical
// blocks it may cover. The node's rules are decodeExtentNode's; the walk
// adds that every extent and tree block lies inside the filesystem, that
// no tree block is reached twice, and the budgets.
func (w *extentWalker) node(node []byte, blk uint64, depth int, lo, hi uint64) error {
	v, in := w.v, w.in
	off := int64(blk) * int64(v.bs)
	if blk == 0 {
		off = -1
	}
	bad := func(format string, args ...any) error {
		where := "extent tree root"
		if blk != 0 {
			where = fmt.Sprintf("extent tree block %d", blk)
		}
		return corruptf(off, in.ino, where+": "+format, args...)
	}
	n := decodeExtentNode(node, blk, depth, lo, hi, v.csum, v.seedOf(in))
	if len(n.problems) > 0 {
		return corruptf(off, in.ino, "%s", n.problems[0])
	}
	if len(w.m.ext)+len(n.extents) > w.maxExtents {
		return bad("more than %d extents (Options.MaxExtents)", w.maxExtents)
	}
	for _, e := range n.extents {
		if e.Start < v.firstDataBlock || e.Start+uint64(e.Len) > v.blocksCount {
			return bad("extent %d+%d -> %d outside the filesystem", e.Block, e.Len, e.Start)
		}
		w.m.ext = append(w.m.ext, e)
	}
	child := make([]byte, v.bs)
	for i, ch := range n.children {
		if ch.leaf < v.firstDataBlock || ch.leaf >= v.blocksCount || ch.leaf == 0 {
			return bad("index %d points at block %d outside the filesystem", i, ch.leaf)
		}
		if w.seen[ch.leaf] {
			return bad("index %d points at block %d, already in the tree", i, ch.leaf)
		}
		if w.nodes++; w.nodes > w.maxNodes {
			return bad("more than %d tree blocks (Options.MaxExtentNodes)", w.maxNodes)
		}
		w.seen[ch.leaf] = true
		if err := v.readBlock(ch.leaf, child); err != nil {
			return err
		}
		w.m.tree = append(w.m.tree, ch.leaf)
		if err := w.node(child, ch.leaf, int(n.h.Depth)-1, ch.lo, ch.hi); err != nil {
			return err
		}
	}
	return nil
}

// lookup maps logical block lblk to (physical, run length, uninit); ok is
// false for a hole, with run the hole's length up to the next extent
// (0 = to infinity).
func (m *extentMap) lookup(lblk uint32) (phys uint64, run uint32, uninit, ok bool) {
	i := sort.Search(len(m.ext), func(i int) bool {
		return uint64(m.ext[i].Block)+uint64(m.ext[i].Len) > uint64(lblk)
	})
	if i == len(m.ext) {
		return 0, 0, false, false
	}
	e := m.ext[i]
	if lblk < e.Block {
		return 0, e.Block - lblk, false, false
	}
	d := lblk - e.Block
	return e.Start + uint64(d), uint32(e.Len) - d, e.Uninit, true
}

// insert maps [lblk, lblk+n) to [phys, phys+n) (the range must be a hole),
// merging with neighbours where contiguous.
func (m *extentMap) insert(lblk uint32, phys uint64, n uint32) {
	m.dirty = true
	i := sort.Search(len(m.ext), func(i int) bool { return m.ext[i].Block > lblk })
	// Merge with the previous extent.
	if i > 0 {
		p := &m.ext[i-1]
		if !p.Uninit && uint64(p.Block)+uint64(p.Len) == uint64(lblk) && p.Start+uint64(p.Len) == phys &&
			uint32(p.Len)+n <= disk.ExtentInitMaxLen {
			p.Len += uint16(n)
			m.mergeNext(i - 1)
			return
		}
	}
	for n > 0 {
		l := min(n, disk.ExtentInitMaxLen)
		m.ext = append(m.ext, disk.Extent{})
		copy(m.ext[i+1:], m.ext[i:])
		m.ext[i] = disk.Extent{Block: lblk, Len: uint16(l), Start: phys}
		i++
		lblk += l
		phys += uint64(l)
		n -= l
	}
	m.mergeNext(i - 1)
}

// merges reports whether insert(lblk, phys, n) would extend an existing
// extent rather than add one (n ≤ EXT_INIT_MAX_LEN).
func (m *extentMap) merges(lblk uint32, phys uint64, n uint32) bool {
	i := sort.Search(len(m.ext), func(i int) bool { return m.ext[i].Block > lblk })
	if i > 0 {
		p := m.ext[i-1]
		if !p.Uninit && uint64(p.Block)+uint64(p.Len) == uint64(lblk) && p.Start+uint64(p.Len) == phys &&
			uint32(p.Len)+n <= disk.ExtentInitMaxLen {
			return true
		}
	}
	if i < len(m.ext) {
		x := m.ext[i]
		if !x.Uninit && uint64(lblk)+uint64(n) == uint64(x.Block) && phys+uint64(n) == x.Start &&
			uint32(x.Len)+n <= disk.ExtentInitMaxLen {
			return true
		}
	}
	return false
}

func (m *extentMap) mergeNext(i int) {
	if i+1 >= len(m.ext) {
		return
	}
	a, b := &m.ext[i], m.ext[i+1]
	if !a.Uninit && !b.Uninit && uint64(a.Block)+uint64(a.Len) == uint64(b.Block) &&
		a.Start+uint64(a.Len) == b.Start && uint32(a.Len)+uint32(b.Len) <= disk.ExtentInitMaxLen {
		a.Len += b.Len
		m.ext = append(m.ext[:i+1], m.ext[i+2:]...)
	}
}

// truncate drops every mapping at or past logical block from and returns
// the physical runs that were dropped.
func (m *extentMap) truncate(from uint32) (freed [][2]uint64) {
	out := m.ext[:0]
	for _, e := range m.ext {
		end := e.Block + uint32(e.Len)
		switch {
		case end <= from:
			out = append(out, e)
		case e.Block >= from:
			freed = append(freed, [2]uint64{e.Start, uint64(e.Len)})
		default:
			keep := from - e.Block
			freed = append(freed, [2]uint64{e.Start + uint64(keep), uint64(uint32(e.Len) - keep)})
			e.Len = uint16(keep)
			out = append(out, e)
		}
	}
	if len(freed) > 0 {
		m.dirty = true
	}
	m.ext = out
	return freed
}

// dataBlocks counts mapped blocks.
func (m *extentMap) dataBlocks() uint64 {
	var n uint64
	for _, e := range m.ext {
		n += uint64(e.Len)
	}
	return n
}

// lastBlockEnd is the physical block after the last mapping (an allocation
// goal for appends), or 0.
func (m *extentMap) lastPhysEnd() uint64 {
	if len(m.ext) == 0 {
		return 0
	}
	e := m.ext[len(m.ext)-1]
	return e.Start + uint64(e.Len)
}

// storeExtents writes in's extent tree: in i_block when it fits, otherwise
// as a tree of leaf and index blocks (old tree blocks are freed and new ones
// allocated next to the data).
func (v *FS) storeExtents(in *inode) error {
	m := in.ext
	if m == nil || !m.dirty {
		return nil
	}
	for _, b := range m.tree {
		if err := v.freeBlocks(b, 1); err != nil {
			return err
		}
	}
	m.tree = m.tree[:0]
	in.d.Flags |= disk.FlagExtents
	root := in.d.Block[:]
	clear(root)
	if len(m.ext) <= disk.ExtentsInInode {
		h := disk.ExtentHeader{Magic: disk.ExtentMagic, Entries: uint16(len(m.ext)), Max: disk.ExtentsInInode}
		h.EncodeInto(root)
		for i, e := range m.ext {
			e.EncodeInto(root[disk.ExtentHeaderSize+i*disk.ExtentEntrySize:])
		}
		m.dirty = false
		return nil
	}
	// eh_max as the kernel computes it; the checksum tail always fits in
	// the remainder.
	perBlock := disk.ExtentBlockMax(v.bs)
	// Level 0: leaves.
	type node struct {
		first uint32
		blk   uint64
	}
	var level []node
	goal := uint64(0)
	if len(m.ext) > 0 {
		goal = m.ext[0].Start
	}
	writeNode := func(depth int, fill func(b []byte) int, first uint32) (node, error) {
		blk, _, err := v.allocBlocks(goal, 1)
		if err != nil {
			return node{}, err
		}
		goal = blk + 1
		m.tree = append(m.tree, blk)
		b := make([]byte, v.bs)
		n := fill(b[disk.ExtentHeaderSize:])
		h := disk.ExtentHeader{Magic: disk.ExtentMagic, Entries: uint16(n), Max: uint16(perBlock), Depth: uint16(depth)}
		h.EncodeInto(b)
		if v.csum {
			c := disk.ExtentBlockChecksum(v.seedOf(in), b, perBlock)
			off := disk.ExtentTailOffset(perBlock)
			b[off], b[off+1], b[off+2], b[off+3] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
		}
		return node{first, blk}, v.metaWriteBlock(blk, b)
	}
	for i := 0; i < len(m.ext); i += perBlock {
		chunk := m.ext[i:min(i+perBlock, len(m.ext))]
		nd, err := writeNode(0, func(b []byte) int {
			for j, e := range chunk {
				e.EncodeInto(b[j*disk.ExtentEntrySize:])
			}
			return len(chunk)
		}, chunk[0].Block)
		if err != nil {
			return err
		}
		level = append(level, nd)
	}
	depth := 1
	for len(level) > disk.ExtentsInInode {
		if depth >= disk.ExtentMaxDepth {
			return corruptf(-1, in.ino, "extent tree would exceed depth %d", disk.ExtentMaxDepth)
		}
		var up []node
		for i := 0; i < len(level); i += perBlock {
			chunk := level[i:min(i+perBlock, len(level))]
			nd, err := writeNode(depth, func(b []byte) int {
				for j, c := range chunk {
					disk.ExtentIdx{Block: c.first, Leaf: c.blk}.EncodeInto(b[j*disk.ExtentEntrySize:])
				}
				return len(chunk)
			}, chunk[0].first)
			if err != nil {
				return err
			}
			up = append(up, nd)
		}
		level = up
		depth++
	}
	h := disk.ExtentHeader{Magic: disk.ExtentMagic, Entries: uint16(len(level)), Max: disk.ExtentsInInode, Depth: uint16(depth)}
	h.EncodeInto(root)
	for i, c := range level {
		disk.ExtentIdx{Block: c.first, Leaf: c.blk}.EncodeInto(root[disk.ExtentHeaderSize+i*disk.ExtentEntrySize:])
	}
	m.dirty = false
	return nil
}
