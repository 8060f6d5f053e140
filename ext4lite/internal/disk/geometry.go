package disk

import "fmt"

// Geometry is the layout a superblock describes, validated once: the
// reader and writer (ext4lite.FS) and the checker (ext4lite.Check) both
// take it from here, so they never disagree about which superblocks are
// sane or how big the tables are.
type Geometry struct {
	BlockSize        int
	Blocks           uint64 // s_blocks_count (its high half only with 64bit)
	FirstDataBlock   uint64
	BlocksPerGroup   uint32
	InodesPerGroup   uint32
	InodeSize        int
	Groups           uint32
	DescSize         int    // bytes per group descriptor in use: 32, or s_desc_size with 64bit
	GDTBlocks        uint32 // blocks of one copy of the descriptor table
	InodeTableBlocks uint64 // blocks of one group's inode table
	Csum             bool   // metadata_csum
	GdtCsum          bool   // uninit_bg's crc16 descriptors (without metadata_csum)
	Seed             uint32 // metadata checksum seed (with Csum)
}

// Bounds the geometry refuses past: 2^48 blocks is the format's limit,
// 2^24 groups (2 PiB of 4 KiB blocks) bounds what a reader allocates per
// group before reading any of them.
const (
	MaxBlocks = 1 << 48
	MaxGroups = 1 << 24
)

// GeometryError is a superblock whose layout is impossible (Unsupported
// false: corruption) or that asks for what gvx does not handle.
type GeometryError struct {
	Msg         string
	Unsupported bool
}

func (e *GeometryError) Error() string { return e.Msg }

// Geometry derives and checks the layout: block size, counts per group,
// inode size, first data block, group count against the inode count,
// descriptor size, and that the descriptor table and an inode table fit.
// It does not look at features beyond the ones that change the layout
// (64bit, bigalloc, metadata_csum, uninit_bg, metadata_csum_seed).
func (sb *Superblock) Geometry() (*Geometry, error) {
	bad := func(format string, args ...any) (*Geometry, error) {
		return nil, &GeometryError{Msg: fmt.Sprintf(format, args...)}
	}
	if sb.LogBlockSize > 6 {
		return bad("block size 2^%d KiB", sb.LogBlockSize)
	}
	if sb.LogClusterSize != sb.LogBlockSize {
		return nil, &GeometryError{Msg: "bigalloc clusters", Unsupported: true}
	}
	g := &Geometry{
		BlockSize:      sb.BlockSize(),
		Blocks:         uint64(sb.BlocksCountLo),
		FirstDataBlock: uint64(sb.FirstDataBlock),
		BlocksPerGroup: sb.BlocksPerGroup,
		InodesPerGroup: sb.InodesPerGroup,
		InodeSize:      int(sb.InodeSize),
		DescSize:       GroupDescSize32,
	}
	if sb.FeatureIncompat&Incompat64bit != 0 {
		g.Blocks = sb.BlocksCount()
	}
	bs := g.BlockSize
	switch {
	case g.BlocksPerGroup == 0 || g.BlocksPerGroup > uint32(bs*8) || g.BlocksPerGroup%8 != 0:
		return bad("%d blocks per group", g.BlocksPerGroup)
	case g.InodesPerGroup == 0 || g.InodesPerGroup > uint32(bs*8) || g.InodesPerGroup%8 != 0:
		return bad("%d inodes per group", g.InodesPerGroup)
	case g.InodeSize < GoodOldInodeSize || g.InodeSize > bs || g.InodeSize&(g.InodeSize-1) != 0:
		return bad("inode size %d", g.InodeSize)
	case g.FirstDataBlock >= g.Blocks || (bs == 1024) != (g.FirstDataBlock == 1):
		return bad("first data block %d with %d-byte blocks", g.FirstDataBlock, bs)
	case g.Blocks > MaxBlocks:
		return bad("%d blocks", g.Blocks)
	}
	groups := (g.Blocks - g.FirstDataBlock + uint64(g.BlocksPerGroup) - 1) / uint64(g.BlocksPerGroup)
	if groups > MaxGroups {
		return nil, &GeometryError{Msg: fmt.Sprintf("%d block groups (more than %d)", groups, MaxGroups), Unsupported: true}
	}
	g.Groups = uint32(groups)
	if uint64(g.Groups)*uint64(g.InodesPerGroup) != uint64(sb.InodesCount) {
		return bad("%d inodes for %d groups of %d", sb.InodesCount, g.Groups, g.InodesPerGroup)
	}
	if sb.FirstIno < GoodOldFirstIno || sb.FirstIno >= sb.InodesCount {
		return bad("first inode %d", sb.FirstIno)
	}
	if sb.FeatureIncompat&Incompat64bit != 0 {
		g.DescSize = int(sb.DescSize)
		if g.DescSize < GroupDescSize64 || g.DescSize > 1024 || g.DescSize&(g.DescSize-1) != 0 {
			return bad("group descriptor size %d", g.DescSize)
		}
	}
	g.GDTBlocks = uint32((uint64(g.Groups)*uint64(g.DescSize) + uint64(bs) - 1) / uint64(bs))
	if uint64(g.GDTBlocks)+g.FirstDataBlock+1 >= g.Blocks {
		return bad("group descriptor table does not fit")
	}
	g.InodeTableBlocks = (uint64(g.InodesPerGroup)*uint64(g.InodeSize) + uint64(bs) - 1) / uint64(bs)
	if uint64(g.BlocksPerGroup) <= g.InodeTableBlocks+2 {
		return bad("inode table of %d blocks does not fit a group of %d", g.InodeTableBlocks, g.BlocksPerGroup)
	}
	g.Csum = sb.FeatureROCompat&ROCompatMetadataCsum != 0
	g.GdtCsum = !g.Csum && sb.FeatureROCompat&ROCompatGdtCsum != 0
	if g.Csum {
		g.Seed = CRC32c(^uint32(0), sb.UUID[:])
		if sb.FeatureIncompat&IncompatCsumSeed != 0 {
			g.Seed = sb.ChecksumSeed
		}
	}
	return g, nil
}
