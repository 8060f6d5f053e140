package ext4lite

import (
	"encoding/binary"
	"fmt"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// extentNode is one extent tree node (the root in i_block, or a tree
// block) decoded and validated by decodeExtentNode: the one set of rules
// the reader (extentWalker) and Check (checker.extentNode) both apply, so
// a tree Check calls clean is a tree the reader loads.
type extentNode struct {
	h        disk.ExtentHeader
	extents  []disk.Extent // depth 0: the entries that passed, in order
	children []extentChild // depth > 0: the entries that passed, in order
	// problems lists what is wrong, in on-disk order, each prefixed by
	// where it is: the reader refuses the tree, Check reports them. fatal
	// reports that the header itself is unusable: no entry was decoded.
	problems []string
	fatal    bool
	// findings lists departures from what the kernel writes that do not
	// make the tree ambiguous (a tree block's eh_max below the kernel's,
	// an empty tree block, a first entry starting after its index's
	// start): e2fsck reports them and so does Check, but the kernel reads
	// such a tree and so does the reader.
	findings []string
}

// extentChild is an index entry with the logical range [lo, hi) its
// subtree must cover.
type extentChild struct {
	leaf   uint64
	lo, hi uint64
}

// decodeExtentNode validates node: the header (magic, eh_max within the
// node, eh_entries ≤ eh_max, depth at most EXT4_MAX_EXTENT_DEPTH at the
// root and one less than the parent's below it, the checksum tail of a
// tree block) and every entry (leaves: non-zero length, in order, inside
// [lo, hi); indexes: in order and inside [lo, hi)); as findings only, a
// tree block's eh_max as the kernel sizes it, no empty tree block, and a
// tree block's first entry starting at lo. blk is the tree block (0 for the root in i_block)
// and depth the depth the parent expects (-1 for the root). seed is the
// inode's checksum seed, used when csum is set.
func decodeExtentNode(node []byte, blk uint64, depth int, lo, hi uint64, csum bool, seed uint32) *extentNode {
	n := &extentNode{h: disk.DecodeExtentHeader(node)}
	h := n.h
	where := "extent tree root"
	if blk != 0 {
		where = fmt.Sprintf("extent tree block %d", blk)
	}
	fail := func(format string, args ...any) {
		n.problems = append(n.problems, where+": "+fmt.Sprintf(format, args...))
	}
	note := func(format string, args ...any) {
		n.findings = append(n.findings, where+": "+fmt.Sprintf(format, args...))
	}
	fatal := func(format string, args ...any) *extentNode {
		fail(format, args...)
		n.fatal = true
		return n
	}
	capacity := (len(node) - disk.ExtentHeaderSize) / disk.ExtentEntrySize
	switch {
	case h.Magic != disk.ExtentMagic:
		return fatal("bad magic %#x", h.Magic)
	case int(h.Max) > capacity || h.Max == 0:
		return fatal("eh_max %d (room for %d)", h.Max, capacity)
	case h.Entries > h.Max:
		return fatal("%d entries, eh_max %d", h.Entries, h.Max)
	case depth < 0 && h.Depth > disk.ExtentMaxDepth:
		return fatal("depth %d", h.Depth)
	case depth >= 0 && int(h.Depth) != depth:
		return fatal("depth %d, parent expects %d", h.Depth, depth)
	}
	if blk != 0 && int(h.Max) < capacity-2 {
		note("eh_max %d (room for %d)", h.Max, capacity)
	}
	if blk != 0 {
		if csum {
			off := disk.ExtentTailOffset(int(h.Max))
			if off+disk.ExtentTailSize > len(node) {
				fail("no room for the checksum tail")
			} else if got, want := binary.LittleEndian.Uint32(node[off:]), disk.ExtentBlockChecksum(seed, node, int(h.Max)); got != want {
				fail("checksum %#x, computed %#x", got, want)
			}
		}
		if h.Entries == 0 {
			note("empty node")
		}
	}
	entry := func(i int) []byte { return node[disk.ExtentHeaderSize+i*disk.ExtentEntrySize:] }
	prevEnd := lo
	if h.Depth == 0 {
		for i := 0; i < int(h.Entries); i++ {
			e := disk.DecodeExtent(entry(i))
			end := uint64(e.Block) + uint64(e.Len)
			switch {
			case e.Len == 0:
				fail("extent %d has length 0", i)
				continue
			case uint64(e.Block) < prevEnd:
				fail("extent %d (logical %d) overlaps or is out of order (expected ≥ %d)", i, e.Block, prevEnd)
				continue
			case end > hi:
				fail("extent %d (logical %d+%d) ends past its index range (%d)", i, e.Block, e.Len, hi)
				continue
			}
			if i == 0 && blk != 0 && uint64(e.Block) != lo {
				note("first extent starts at logical %d, its index says %d", e.Block, lo)
			}
			prevEnd = end
			n.extents = append(n.extents, e)
		}
		return n
	}
	for i := 0; i < int(h.Entries); i++ {
		x := disk.DecodeExtentIdx(entry(i))
		if uint64(x.Block) < prevEnd || uint64(x.Block) >= hi {
			fail("index %d (logical %d) out of order or range [%d, %d)", i, x.Block, prevEnd, hi)
			return n // the entries after it have no trustworthy range
		}
		if i == 0 && blk != 0 && uint64(x.Block) != lo {
			note("first index starts at logical %d, its parent says %d", x.Block, lo)
		}
		next := hi
		if i+1 < int(h.Entries) {
			next = min(hi, uint64(disk.DecodeExtentIdx(entry(i+1)).Block))
		}
		n.children = append(n.children, extentChild{leaf: x.Leaf, lo: uint64(x.Block), hi: next})
		prevEnd = uint64(x.Block) + 1
	}
	return n
}
