package ext4lite

import (
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// TestDecodeExtentNode: the rules the reader and Check share, one case
// each: what is refused, and with what word.
func TestDecodeExtentNode(t *testing.T) {
	const bs = 1024
	max := disk.ExtentBlockMax(bs)
	node := func(h disk.ExtentHeader, entries ...func(b []byte)) []byte {
		b := make([]byte, bs)
		h.Magic = disk.ExtentMagic
		h.EncodeInto(b)
		for i, e := range entries {
			e(b[disk.ExtentHeaderSize+i*disk.ExtentEntrySize:])
		}
		return b
	}
	ext := func(block uint32, n uint16) func([]byte) {
		return func(b []byte) { disk.Extent{Block: block, Len: n, Start: 100}.EncodeInto(b) }
	}
	idx := func(block uint32) func([]byte) {
		return func(b []byte) { disk.ExtentIdx{Block: block, Leaf: 50}.EncodeInto(b) }
	}
	for _, tc := range []struct {
		name       string
		b          []byte
		blk        uint64
		depth      int
		lo, hi     uint64
		want       string // "" = no problem
		fatal      bool
		nExt, nIdx int
		finding    bool // a departure Check reports but the reader reads
	}{
		{"leaf", node(disk.ExtentHeader{Entries: 2, Max: uint16(max)}, ext(10, 5), ext(20, 1)), 7, 0, 10, 100, "", false, 2, 0, false},
		{"root depth 6", node(disk.ExtentHeader{Max: 4, Depth: 6}), 0, -1, 0, 1 << 32, "depth 6", true, 0, 0, false},
		{"depth not parent's - 1", node(disk.ExtentHeader{Entries: 1, Max: uint16(max), Depth: 2}, idx(0)), 7, 0, 0, 100, "parent expects 0", true, 0, 0, false},
		{"eh_max too small for a block", node(disk.ExtentHeader{Entries: 1, Max: 4}, ext(0, 1)), 7, 0, 0, 100, "eh_max 4", false, 1, 0, true},
		{"eh_max past the block", node(disk.ExtentHeader{Entries: 1, Max: uint16(max + 1)}, ext(0, 1)), 7, 0, 0, 100, "eh_max 85", true, 0, 0, false},
		{"empty tree block", node(disk.ExtentHeader{Max: uint16(max)}), 7, 0, 0, 100, "empty node", false, 0, 0, true},
		{"extent past hi", node(disk.ExtentHeader{Entries: 1, Max: uint16(max)}, ext(10, 95)), 7, 0, 10, 100, "ends past its index range (100)", false, 0, 0, false},
		{"extents overlap", node(disk.ExtentHeader{Entries: 2, Max: uint16(max)}, ext(10, 5), ext(12, 1)), 7, 0, 10, 100, "overlaps", false, 1, 0, false},
		{"first extent not at lo", node(disk.ExtentHeader{Entries: 1, Max: uint16(max)}, ext(11, 1)), 7, 0, 10, 100, "its index says 10", false, 1, 0, true},
		{"index out of order", node(disk.ExtentHeader{Entries: 2, Max: 4, Depth: 1}, idx(50), idx(20)), 0, -1, 0, 1 << 32, "index 1 (logical 20) out of order", false, 0, 1, false},
		{"index ranges", node(disk.ExtentHeader{Entries: 2, Max: 4, Depth: 1}, idx(0), idx(20)), 0, -1, 0, 1 << 32, "", false, 0, 2, false},
	} {
		n := decodeExtentNode(tc.b, tc.blk, tc.depth, tc.lo, tc.hi, false, 0)
		got := strings.Join(n.problems, "; ")
		if tc.finding {
			if len(n.problems) != 0 {
				t.Errorf("%s: %q should be a finding only", tc.name, got)
			}
			got = strings.Join(n.findings, "; ")
		}
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		case n.fatal != tc.fatal:
			t.Errorf("%s: fatal %v", tc.name, n.fatal)
		case !tc.fatal && (len(n.extents) != tc.nExt || len(n.children) != tc.nIdx):
			t.Errorf("%s: %d extents, %d children; want %d, %d", tc.name, len(n.extents), len(n.children), tc.nExt, tc.nIdx)
		}
		if tc.name == "index ranges" && (n.children[0].hi != 20 || n.children[1].lo != 20 || n.children[1].hi != 1<<32) {
			t.Errorf("index ranges: %+v", n.children)
		}
	}
}
