package ext4lite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
)

// CheckOptions bound a consistency check. The zero value (or nil) is valid.
type CheckOptions struct {
	// MaxFindings stops recording findings after this many (default 200);
	// CheckReport.Omitted counts the rest.
	MaxFindings int
	// AllowOrphans accepts inodes on the orphan list (files unlinked while
	// open) without a finding, for checking a volume in use. By default
	// they are reported, as e2fsck -fn reports them: at rest, an orphan
	// list means a crash left work for the next read-write open.
	AllowOrphans bool
}

// Finding is one inconsistency Check found.
type Finding struct {
	Ino   uint32 `json:"ino,omitempty"`   // inode concerned, 0 when none
	Block uint64 `json:"block,omitempty"` // block concerned, 0 when none
	Msg   string `json:"msg"`
}

func (f Finding) String() string {
	var b strings.Builder
	if f.Ino != 0 {
		fmt.Fprintf(&b, "inode %d: ", f.Ino)
	}
	if f.Block != 0 {
		fmt.Fprintf(&b, "block %d: ", f.Block)
	}
	b.WriteString(f.Msg)
	return b.String()
}

// CheckReport is what Check found and counted.
type CheckReport struct {
	Findings []Finding `json:"findings"`
	Omitted  int       `json:"omitted,omitempty"` // findings past CheckOptions.MaxFindings
	Inodes   uint32    `json:"inodes"`            // inodes in use (reserved ones included)
	Dirs     uint32    `json:"dirs"`              // directories in use
	Blocks   uint64    `json:"blocks"`            // blocks in use (metadata and data)
	Free     uint64    `json:"free_blocks"`       // free blocks
}

// Clean reports whether the check found nothing.
func (r *CheckReport) Clean() bool { return len(r.Findings) == 0 && r.Omitted == 0 }

// Err is nil for a clean report, else an error wrapping ErrCorrupt that
// lists the first findings.
func (r *CheckReport) Err() error {
	if r.Clean() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s)", len(r.Findings)+r.Omitted)
	for i, f := range r.Findings {
		if i == 10 {
			b.WriteString("; …")
			break
		}
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	return fmt.Errorf("%w: %s", ErrCorrupt, b.String())
}

// Check verifies the volume on dev without writing to it, looking for what
// `e2fsck -fn` reports: superblock and group descriptors (checksums,
// geometry, counts), bitmaps (checksums, padding, and that they equal the
// blocks and inodes actually in use), every in-use inode (checksum, type,
// extent tree, i_blocks, i_size, symlinks, devices, xattrs), block
// ownership (each block claimed once), directories (entries, checksums,
// htree structure and hash ranges), link counts, reachability,
// lost+found, the journal superblock and the orphan list.
//
// It is an independent reading of the on-disk format (it shares only
// internal/disk with the reader and writer), cross-checked against e2fsck
// in the tests: for every corruption e2fsck -fn reports, Check reports
// something too.
//
// Inconsistencies are findings in the report; the error is for an I/O
// failure, a superblock too damaged to interpret (ErrNotExt4, ErrCorrupt)
// or a feature the checker does not know (ErrUnsupported). Work and memory
// are bounded by the volume's size (about one bit per block), whatever its
// bytes say.
func Check(dev Device, opts *CheckOptions) (*CheckReport, error) {
	c := &checker{dev: dev, rep: &CheckReport{}, max: 200}
	if opts != nil {
		if opts.MaxFindings > 0 {
			c.max = opts.MaxFindings
		}
		c.allowOrphans = opts.AllowOrphans
	}
	if err := c.superblock(); err != nil {
		return nil, err
	}
	if !c.stop {
		c.run()
	}
	if c.ioErr != nil {
		return nil, c.ioErr
	}
	return c.rep, nil
}

// Check flushes pending changes (for a writable volume) and checks the
// volume's bytes as Check does.
func (v *FS) Check(opts *CheckOptions) (*CheckReport, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	if !v.readOnly {
		if err := v.flushMetadata(); err != nil {
			return nil, err
		}
	}
	return Check(v.dev, opts)
}

// Features the checker understands; anything else is ErrUnsupported.
const (
	checkCompat = disk.CompatDirPrealloc | disk.CompatImagicInodes | disk.CompatHasJournal |
		disk.CompatExtAttr | disk.CompatResizeInode | disk.CompatDirIndex | disk.CompatSparseSuper2 |
		disk.CompatFastCommit | disk.CompatStableInodes
	checkIncompat = supportedIncompat
	checkROCompat = supportedROCompat
)

// checker holds one run's state. Internal helpers record findings with
// c.add and stop early (c.stop) on I/O errors or exhausted budgets.
type checker struct {
	dev          Device
	rep          *CheckReport
	max          int
	allowOrphans bool
	stop         bool
	ioErr        error

	sb             *disk.Superblock
	bs             int
	blocks, fdb    uint64
	bpg, ipg       uint32
	groups         uint32
	gdtBlocks      uint32
	itb            uint64 // inode table blocks per group
	isz, descSize  int
	csum, gdtCsum  bool
	seed           uint32
	hasJournal     bool
	resizeInode    bool
	filetype       bool
	dirIndex       bool
	largeDir       bool
	dirNlink       bool
	hugeFile       bool
	flexBG         bool
	extentsFeature bool

	gds     []*disk.GroupDesc
	claimed [][]byte // per group: blocks found in use
	budget  int64    // block claims left before the check gives up

	inodes  map[uint32]*cInode
	xattrs  map[uint64]*cXattrBlock
	orphans map[uint32]bool // on the s_last_orphan chain

	// Directory pass results.
	counted  map[uint32]uint32   // links counted from entries, ".", ".."
	named    map[uint32]uint32   // directory → the directory naming it
	children map[uint32][]uint32 // directory → inodes its entries name
}

// cInode is what the checker keeps about an in-use inode.
type cInode struct {
	mode    uint16
	links   uint16
	flags   uint32
	gen     uint32
	size    uint64
	ext     []disk.Extent // directories and slow symlinks only
	extOK   bool          // the extent tree parsed
	parent  uint32        // directories: their ".." entry
	reached bool
}

type cXattrBlock struct {
	refcount uint32 // h_refcount on disk
	users    uint32 // in-use inodes pointing at it
	ok       bool   // header valid
}

func (c *checker) add(ino uint32, blk uint64, format string, args ...any) {
	if len(c.rep.Findings) >= c.max {
		c.rep.Omitted++
		return
	}
	c.rep.Findings = append(c.rep.Findings, Finding{Ino: ino, Block: blk, Msg: fmt.Sprintf(format, args...)})
}

// read reads len(p) bytes at off. A read past the end of the device is a
// finding (false returned); another error stops the check.
func (c *checker) read(p []byte, off int64, ino uint32, what string) bool {
	if c.stop {
		return false
	}
	n, err := c.dev.ReadAt(p, off)
	if n == len(p) {
		return true
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		c.add(ino, 0, "%s: read of %d bytes at byte %d is past the end of the device", what, len(p), off)
		return false
	}
	c.ioErr, c.stop = err, true
	return false
}

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

func (c *checker) readBlock(blk uint64, p []byte, ino uint32, what string) bool {
	if blk >= c.blocks {
		c.add(ino, blk, "%s: block past the end of the filesystem (%d blocks)", what, c.blocks)
		return false
	}
	return c.read(p[:c.bs], int64(blk)*int64(c.bs), ino, what)
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
	bad := func(format string, args ...any) error {
		return corruptf(disk.SuperblockOffset, 0, "superblock: "+format, args...)
	}
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
	if sb.LogBlockSize > 6 {
		return bad("block size 2^%d KiB", sb.LogBlockSize)
	}
	if sb.LogClusterSize != sb.LogBlockSize {
		return fmt.Errorf("%w: check of bigalloc clusters", ErrUnsupported)
	}
	c.bs = sb.BlockSize()
	c.blocks = uint64(sb.BlocksCountLo)
	if sb.FeatureIncompat&disk.Incompat64bit != 0 {
		c.blocks = sb.BlocksCount()
	}
	c.fdb, c.bpg, c.ipg, c.isz = uint64(sb.FirstDataBlock), sb.BlocksPerGroup, sb.InodesPerGroup, int(sb.InodeSize)
	switch {
	case c.bpg == 0 || c.bpg > uint32(c.bs*8) || c.bpg%8 != 0:
		return bad("%d blocks per group", c.bpg)
	case c.ipg == 0 || c.ipg > uint32(c.bs*8) || c.ipg%8 != 0:
		return bad("%d inodes per group", c.ipg)
	case c.isz < disk.GoodOldInodeSize || c.isz > c.bs || c.isz&(c.isz-1) != 0:
		return bad("inode size %d", c.isz)
	case c.fdb >= c.blocks || (c.bs == 1024) != (c.fdb == 1):
		return bad("first data block %d with %d-byte blocks", c.fdb, c.bs)
	case c.blocks > 1<<48:
		return bad("%d blocks", c.blocks)
	}
	if sb.ClustersPerGroup != c.bpg {
		c.add(0, 0, "superblock: %d clusters per group, %d blocks per group", sb.ClustersPerGroup, c.bpg)
	}
	c.groups = uint32((c.blocks - c.fdb + uint64(c.bpg) - 1) / uint64(c.bpg))
	if uint64(c.groups)*uint64(c.ipg) != uint64(sb.InodesCount) {
		return bad("%d inodes for %d groups of %d", sb.InodesCount, c.groups, c.ipg)
	}
	if sb.FirstIno < disk.GoodOldFirstIno || sb.FirstIno >= sb.InodesCount {
		return bad("first inode %d", sb.FirstIno)
	}
	c.descSize = disk.GroupDescSize32
	if sb.FeatureIncompat&disk.Incompat64bit != 0 {
		c.descSize = int(sb.DescSize)
		if c.descSize < disk.GroupDescSize64 || c.descSize > 1024 || c.descSize&(c.descSize-1) != 0 {
			return bad("group descriptor size %d", c.descSize)
		}
	}
	c.gdtBlocks = uint32((uint64(c.groups)*uint64(c.descSize) + uint64(c.bs) - 1) / uint64(c.bs))
	if uint64(c.gdtBlocks)+c.fdb+1 >= c.blocks {
		return bad("group descriptor table does not fit")
	}
	if c.groups > 1<<24 {
		return fmt.Errorf("%w: check of %d block groups (more than %d)", ErrUnsupported, c.groups, 1<<24)
	}
	c.itb = (uint64(c.ipg)*uint64(c.isz) + uint64(c.bs) - 1) / uint64(c.bs)
	if uint64(c.bpg) <= c.itb+2 {
		return bad("inode table of %d blocks does not fit a group of %d", c.itb, c.bpg)
	}
	c.csum = sb.FeatureROCompat&disk.ROCompatMetadataCsum != 0
	c.gdtCsum = !c.csum && sb.FeatureROCompat&disk.ROCompatGdtCsum != 0
	if c.csum {
		if sb.FeatureIncompat&disk.IncompatCsumSeed != 0 {
			c.seed = sb.ChecksumSeed
		} else {
			c.seed = disk.CRC32c(^uint32(0), sb.UUID[:])
		}
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

	if sb.FeatureIncompat&disk.IncompatRecover != 0 {
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

// run does the passes after the superblock.
func (c *checker) run() {
	c.claimed = make([][]byte, c.groups)
	for g := range c.claimed {
		c.claimed[g] = make([]byte, (c.bpg+7)/8)
	}
	c.inodes = map[uint32]*cInode{}
	c.xattrs = map[uint64]*cXattrBlock{}
	bbs, ibs := c.groupDescs()
	if c.stop {
		return
	}
	c.orphanList()
	c.scanInodes(ibs)
	if c.stop {
		return
	}
	c.checkXattrRefs()
	c.journal()
	c.directories()
	if c.stop {
		return
	}
	c.links()
	c.bitmaps(bbs, ibs)
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

// orphanList walks the orphan chain (s_last_orphan, linked through
// i_dtime): inodes unlinked while still open, which keep their blocks
// until the kernel, ext4lite or e2fsck frees them. They are in use for
// the rest of the check; a chain that leaves the inode range or loops is
// a finding.
func (c *checker) orphanList() {
	c.orphans = map[uint32]bool{}
	slot := make([]byte, c.isz)
	for ino := c.sb.LastOrphan; ino != 0 && !c.stop; {
		if ino < c.sb.FirstIno || ino > c.sb.InodesCount {
			c.add(ino, 0, "orphan list points at inode %d, outside %d..%d", ino, c.sb.FirstIno, c.sb.InodesCount)
			return
		}
		if c.orphans[ino] {
			c.add(ino, 0, "orphan list loops")
			return
		}
		c.orphans[ino] = true
		g, i := (ino-1)/c.ipg, (ino-1)%c.ipg
		t := c.gds[g].InodeTable()
		if t < c.fdb || t+c.itb > c.blocks {
			return // a bad descriptor: already a finding
		}
		if !c.read(slot, int64(t)*int64(c.bs)+int64(i)*int64(c.isz), ino, "orphan inode") {
			return
		}
		in := disk.DecodeInode(slot)
		if in.Mode == 0 {
			c.add(ino, 0, "orphan list holds a free inode")
			return
		}
		ino = in.Dtime
	}
	if len(c.orphans) > 0 && !c.allowOrphans {
		c.add(c.sb.LastOrphan, 0, "%d inode(s) on the orphan list (unlinked while open; the next read-write open frees them)", len(c.orphans))
	}
}

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

func typeWord(typ uint32) string {
	switch typ {
	case disk.ModeReg:
		return "regular file"
	case disk.ModeDir:
		return "directory"
	case disk.ModeSymlink:
		return "symlink"
	case disk.ModeChar:
		return "character device"
	case disk.ModeBlock:
		return "block device"
	case disk.ModeFifo:
		return "fifo"
	case disk.ModeSocket:
		return "socket"
	}
	return fmt.Sprintf("type %#o", typ)
}

func (c *checker) isJournal(ino uint32) bool {
	return c.hasJournal && ino == c.sb.JournalInum && ino < c.sb.FirstIno
}

// journal checks that the journal inode is a regular file whose first
// block holds a jbd2 superblock.
func (c *checker) journal() {
	if !c.hasJournal {
		return
	}
	ino := c.sb.JournalInum
	ci := c.inodes[ino]
	if ino == 0 || ino >= c.sb.FirstIno || ci == nil || ci.mode&disk.ModeTypeMask != disk.ModeReg {
		c.add(ino, 0, "has_journal is set but the journal inode %d is not a regular file", ino)
		return
	}
	if !ci.extOK {
		return // the tree is damaged: already a finding
	}
	dev := &ckJournalDev{c: c, ino: ino}
	for _, e := range ci.ext {
		if uint64(e.Block) != dev.n || e.Uninit {
			c.add(ino, 0, "the journal has a hole or an unwritten extent at block %d", dev.n)
			return
		}
		dev.ext = append(dev.ext, e)
		dev.n += uint64(e.Len)
	}
	if dev.n == 0 || dev.n > 1<<32-1 {
		c.add(ino, 0, "the journal maps %d blocks", dev.n)
		return
	}
	j, err := jbd2.Open(dev, c.bs)
	switch {
	case c.stop:
	case err != nil:
		c.add(ino, ci.ext[0].Start, "journal superblock: %v", err)
	case j.NeedsRecovery() && c.sb.FeatureIncompat&disk.IncompatRecover == 0:
		c.add(ino, ci.ext[0].Start, "the journal holds transactions but needs_recovery is clear")
	}
}

// ckJournalDev reads the journal inode's blocks for jbd2.Open.
type ckJournalDev struct {
	c   *checker
	ino uint32
	ext []disk.Extent // contiguous from logical block 0
	n   uint64        // blocks mapped
}

func (d *ckJournalDev) NumBlocks() uint32 { return uint32(d.n) }

func (d *ckJournalDev) ReadBlock(n uint32, p []byte) error {
	i := sort.Search(len(d.ext), func(i int) bool { return uint64(d.ext[i].Block)+uint64(d.ext[i].Len) > uint64(n) })
	if i == len(d.ext) || n < d.ext[i].Block {
		return fmt.Errorf("journal block %d is not mapped", n)
	}
	if !d.c.readBlock(d.ext[i].Start+uint64(n-d.ext[i].Block), p, d.ino, "journal block") {
		return fmt.Errorf("journal block %d unreadable", n)
	}
	return nil
}

func (d *ckJournalDev) WriteBlock(uint32, []byte) error { return ErrReadOnly }

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
	if c.isJournal(ino) {
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
	w := &extentWalk{ok: true, keep: typ == disk.ModeDir || typ == disk.ModeSymlink || c.isJournal(ino)}
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

// inodeXattrs checks the in-inode attribute area and the external block;
// it returns 1 when the inode owns (a reference to) an external block.
func (c *checker) inodeXattrs(ino uint32, in *disk.Inode, slot []byte) uint64 {
	if c.isz > disk.GoodOldInodeSize {
		start := disk.GoodOldInodeSize + int(in.ExtraIsize)
		if int(in.ExtraIsize) <= c.isz-disk.GoodOldInodeSize && start+disk.XattrIbodyHeaderLen <= c.isz &&
			binary.LittleEndian.Uint32(slot[start:]) == disk.XattrMagic {
			area := slot[start+disk.XattrIbodyHeaderLen:]
			c.xattrEntries(ino, 0, area, area, 0, true)
		}
	}
	blk := in.FileACL()
	if blk == 0 {
		return 0
	}
	if x := c.xattrs[blk]; x != nil {
		x.users++
		return 1
	}
	x := &cXattrBlock{users: 1}
	c.xattrs[blk] = x
	if !c.claim(blk, 1, ino, "xattr block") {
		return 1
	}
	b := make([]byte, c.bs)
	if !c.readBlock(blk, b, ino, "xattr block") {
		return 1
	}
	if m := binary.LittleEndian.Uint32(b); m != disk.XattrMagic {
		c.add(ino, blk, "xattr block: bad magic %#x", m)
		return 1
	}
	x.refcount = binary.LittleEndian.Uint32(b[4:])
	x.ok = true
	if n := binary.LittleEndian.Uint32(b[8:]); n != 1 {
		c.add(ino, blk, "xattr block: h_blocks %d, want 1", n)
	}
	if c.csum {
		if got, want := binary.LittleEndian.Uint32(b[16:]), disk.XattrBlockChecksum(c.seed, blk, b); got != want {
			c.add(ino, blk, "xattr block: checksum %#x, computed %#x", got, want)
		}
	}
	hashes := c.xattrEntries(ino, blk, b[disk.XattrBlockHeaderLen:], b, disk.XattrBlockHeaderLen, false)
	if hashes != nil {
		// libext2fs (mkfs.ext4 -d) leaves h_hash zero; the kernel fills it.
		if got, want := binary.LittleEndian.Uint32(b[12:]), disk.XattrBlockHash(hashes); got != want && got != 0 {
			c.add(ino, blk, "xattr block: header hash %#x, computed %#x", got, want)
		}
	}
	return 1
}

// xattrEntries checks the entries in ents (values relative to base, ents
// starting at entOff in base). In-inode entries may carry a zero hash. It
// returns the entry hashes, nil when the area is damaged.
func (c *checker) xattrEntries(ino uint32, blk uint64, ents, base []byte, entOff int, inInode bool) []uint32 {
	what := "xattr block"
	if inInode {
		what = "in-inode xattrs"
	}
	type region struct{ lo, hi int }
	var regions []region
	hashes := []uint32{}
	p := 0
	for n := 0; ; n++ {
		if p+4 > len(ents) {
			c.add(ino, blk, "%s: entries run past their area", what)
			return nil
		}
		if binary.LittleEndian.Uint32(ents[p:]) == 0 {
			break
		}
		if p+disk.XattrEntryLen > len(ents) {
			c.add(ino, blk, "%s: entry %d header past its area", what, n)
			return nil
		}
		e := disk.DecodeXattrEntry(ents[p:])
		size := disk.XattrEntrySize(int(e.NameLen))
		if e.NameLen == 0 || p+size > len(ents) {
			c.add(ino, blk, "%s: entry %d name (%d bytes) bad or past its area", what, n, e.NameLen)
			return nil
		}
		name := ents[p+disk.XattrEntryLen : p+disk.XattrEntryLen+int(e.NameLen)]
		regions = append(regions, region{entOff + p, entOff + p + size})
		if e.ValueInum != 0 {
			c.add(ino, blk, "%s: entry %d keeps its value in inode %d (ea_inode not supported)", what, n, e.ValueInum)
			return nil
		}
		vo, vs := int(e.ValueOffs), int64(e.ValueSize)
		if vs > int64(len(base)) || vo+int(vs) > len(base) {
			c.add(ino, blk, "%s: entry %d value (%d bytes at %d) past its area", what, n, vs, vo)
			return nil
		}
		value := base[vo : vo+int(vs)]
		if vs > 0 {
			if vo < entOff && !inInode || vo%4 != 0 {
				c.add(ino, blk, "%s: entry %d value offset %d", what, n, vo)
			}
			regions = append(regions, region{vo, vo + disk.XattrValueSize(int(vs))})
		}
		if _, ok := disk.XattrJoinName(e.NameIndex, string(name)); !ok {
			c.add(ino, blk, "%s: entry %d has unknown name index %d", what, n, e.NameIndex)
		}
		h := disk.XattrEntryHash(name, value)
		if e.Hash != h && e.Hash != xattrHashSigned(name, value) && !(inInode && e.Hash == 0) {
			c.add(ino, blk, "%s: entry %d hash %#x, computed %#x", what, n, e.Hash, h)
		}
		hashes = append(hashes, e.Hash)
		p += size
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].lo < regions[j].lo })
	for i := 1; i < len(regions); i++ {
		if regions[i].lo < regions[i-1].hi {
			c.add(ino, blk, "%s: entries and values overlap at byte %d", what, regions[i].lo)
			return nil
		}
	}
	if len(regions) > 0 && regions[len(regions)-1].hi > len(base) {
		c.add(ino, blk, "%s: value padding runs past the area", what)
	}
	return hashes
}

// xattrHashSigned is the entry hash older kernels computed with signed
// chars; e2fsck accepts either.
func xattrHashSigned(name, value []byte) uint32 {
	var h uint32
	for _, ch := range name {
		h = (h << 5) ^ (h >> 27) ^ uint32(int32(int8(ch)))
	}
	for i := 0; i < len(value); i += 4 {
		var w [4]byte
		copy(w[:], value[i:])
		h = (h << 16) ^ (h >> 16) ^ binary.LittleEndian.Uint32(w[:])
	}
	return h
}

// checkXattrRefs compares each shared block's refcount with its users.
func (c *checker) checkXattrRefs() {
	blks := make([]uint64, 0, len(c.xattrs))
	for b := range c.xattrs {
		blks = append(blks, b)
	}
	sort.Slice(blks, func(i, j int) bool { return blks[i] < blks[j] })
	for _, b := range blks {
		if x := c.xattrs[b]; x.ok && x.refcount != x.users {
			c.add(0, b, "xattr block: reference count %d, used by %d inode(s)", x.refcount, x.users)
		}
	}
}

// dirInos lists the in-use directories in order.
func (c *checker) dirInos() []uint32 {
	var out []uint32
	for ino, ci := range c.inodes {
		if ci.mode&disk.ModeTypeMask == disk.ModeDir && (ino >= c.sb.FirstIno || ino == disk.RootIno) {
			out = append(out, ino)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// dirWalk is the state of one directory's check.
type dirWalk struct {
	ino   uint32
	ci    *cInode
	seed  uint32
	names map[string]bool
	hver  uint8
	dots  int // "." and ".." seen
}

// directories parses every directory and records entries, links and
// parents.
func (c *checker) directories() {
	c.counted = map[uint32]uint32{}
	c.named = map[uint32]uint32{}
	c.children = map[uint32][]uint32{}
	for _, ino := range c.dirInos() {
		if c.stop {
			return
		}
		ci := c.inodes[ino]
		c.rep.Dirs++
		if !ci.extOK {
			continue // the tree is damaged: already a finding
		}
		d := &dirWalk{ino: ino, ci: ci, seed: disk.InodeSeed(c.seed, ino, ci.gen), names: map[string]bool{}}
		if ci.flags&disk.FlagIndex != 0 && c.dirIndex {
			c.htreeDir(d)
		} else {
			c.linearDir(d)
		}
		if d.dots < 2 {
			c.add(ino, 0, "directory lacks its '.' and '..' entries")
		}
	}
}

// dirBlocks calls fn for each of the directory's blocks in logical order.
func (c *checker) dirBlocks(d *dirWalk, fn func(lblk uint32, phys uint64, b []byte)) {
	b := make([]byte, c.bs)
	for _, e := range d.ci.ext {
		if e.Uninit {
			continue
		}
		for i := uint32(0); i < uint32(e.Len) && !c.stop; i++ {
			phys := e.Start + uint64(i)
			if !c.readBlock(phys, b, d.ino, "directory block") {
				return
			}
			fn(e.Block+i, phys, b)
		}
	}
}

func (c *checker) linearDir(d *dirWalk) {
	c.dirBlocks(d, func(lblk uint32, phys uint64, b []byte) {
		c.leaf(d, lblk, phys, b, lblk == 0, nil)
	})
}

// hashRange bounds the major hashes a dx leaf may hold: [lo&^1, hi) — or
// up to hi&^1 inclusive when hi has the collision bit (the names hashing
// to it continue from this leaf into the next).
type hashRange struct {
	lo uint32
	hi uint64 // 1<<32 for "no upper bound"
}

func (r hashRange) holds(h uint32) bool {
	if h < r.lo&^1 {
		return false
	}
	if r.hi > 0xFFFFFFFF {
		return true
	}
	if r.hi&1 != 0 {
		return uint64(h) <= r.hi&^1
	}
	return uint64(h) < r.hi
}

// htreeDir checks an indexed directory: the dx root and interior nodes,
// then every leaf against the hash range its index gives it.
func (c *checker) htreeDir(d *dirWalk) {
	nblocks := uint32(0)
	for _, e := range d.ci.ext {
		nblocks = max(nblocks, e.Block+uint32(e.Len))
	}
	if nblocks == 0 {
		return
	}
	blocks := map[uint32]uint64{} // lblk → phys
	for _, e := range d.ci.ext {
		for i := uint32(0); i < uint32(e.Len); i++ {
			blocks[e.Block+i] = e.Start + uint64(i)
		}
	}
	root := make([]byte, c.bs)
	if _, ok := blocks[0]; !ok {
		return // a hole at block 0: dirSize reported it
	}
	if !c.readBlock(blocks[0], root, d.ino, "htree root") {
		return
	}
	kind := map[uint32]string{0: "root"}
	ranges := map[uint32]hashRange{}
	ok := c.dxRoot(d, root, blocks[0], func(lvl int, lblk uint32, r hashRange) bool {
		if lblk == 0 || lblk >= nblocks {
			c.add(d.ino, 0, "htree index points at logical block %d of %d", lblk, nblocks)
			return false
		}
		if k, dup := kind[lblk]; dup {
			c.add(d.ino, 0, "htree: logical block %d referenced twice (already a %s)", lblk, k)
			return false
		}
		if lvl > 0 {
			kind[lblk] = "node"
		} else {
			kind[lblk] = "leaf"
			ranges[lblk] = r
		}
		return true
	}, blocks)
	c.dirBlocks(d, func(lblk uint32, phys uint64, b []byte) {
		switch k := kind[lblk]; {
		case lblk == 0:
			c.dotsOfRoot(d, root, phys)
		case k == "node":
		case k == "leaf" && ok:
			r := ranges[lblk]
			c.leaf(d, lblk, phys, b, false, &r)
		default:
			if ok {
				c.add(d.ino, phys, "htree: directory block %d is not referenced by the index", lblk)
			}
			c.leaf(d, lblk, phys, b, false, nil)
		}
	})
}

// dxRoot checks the root and interior nodes, calling visit for each child
// (level > 0 for interior nodes). It reports whether the index is sound.
func (c *checker) dxRoot(d *dirWalk, root []byte, phys uint64, visit func(level int, lblk uint32, r hashRange) bool, blocks map[uint32]uint64) bool {
	info := disk.DecodeDxRootInfo(root)
	levels := int(info.IndirectLevels)
	maxLevels := disk.DxMaxLevels
	if c.largeDir {
		maxLevels = disk.DxMaxLevelsBig
	}
	hv := info.HashVersion
	if hv <= disk.HashTea && c.sb.Flags&disk.FlagUnsignedHash != 0 {
		hv += 3
	}
	d.hver = hv
	switch {
	case info.ReservedZero != 0:
		c.add(d.ino, phys, "htree root: reserved field %#x", info.ReservedZero)
		return false
	case info.InfoLength != disk.DxRootInfoLen:
		c.add(d.ino, phys, "htree root: info length %d", info.InfoLength)
		return false
	case levels >= maxLevels:
		c.add(d.ino, phys, "htree root: %d indirect levels", levels)
		return false
	case hv > disk.HashTeaUnsigned:
		c.add(d.ino, phys, "htree root: hash version %d", info.HashVersion)
		return false
	}
	return c.dxNode(d, root, phys, disk.DxRootEntries, levels, hashRange{0, 1 << 32}, visit, blocks)
}

// dxNode checks one index node's entries (at off) and descends.
func (c *checker) dxNode(d *dirWalk, b []byte, phys uint64, off, level int, r hashRange, visit func(int, uint32, hashRange) bool, blocks map[uint32]uint64) bool {
	count, limit := disk.DxCountLimit(b, off)
	if want := disk.DxLimit(c.bs, off, c.csum); limit != want {
		c.add(d.ino, phys, "htree node: limit %d, want %d", limit, want)
		return false
	}
	if count == 0 || count > limit {
		c.add(d.ino, phys, "htree node: count %d (limit %d)", count, limit)
		return false
	}
	if c.csum {
		if got, want := disk.StoredDxChecksum(b, off, limit), disk.DxChecksum(d.seed, b, off, count, limit); got != want {
			c.add(d.ino, phys, "htree node: checksum %#x, computed %#x", got, want)
		}
	}
	ents := make([]disk.DxEntry, count)
	for i := range ents {
		ents[i] = disk.DxEntryAt(b, off, i)
	}
	ok := true
	for i := 1; i < count; i++ {
		if ents[i].Hash < ents[i-1].Hash || !r.holds(ents[i].Hash&^1) && i > 0 {
			c.add(d.ino, phys, "htree node: key %d (%#x) out of order or outside [%#x, %#x)", i, ents[i].Hash, r.lo, r.hi)
			return false
		}
	}
	child := make([]byte, c.bs)
	for i, e := range ents {
		cr := hashRange{r.lo, r.hi}
		if i > 0 {
			cr.lo = e.Hash
		}
		if i+1 < count {
			cr.hi = uint64(ents[i+1].Hash)
		}
		if !visit(level, e.Block, cr) {
			ok = false
			continue
		}
		if level == 0 {
			continue
		}
		cphys, mapped := blocks[e.Block]
		if !mapped || !c.readBlock(cphys, child, d.ino, "htree node") {
			ok = false
			continue
		}
		fake := disk.DecodeDirent(child)
		if fake.Inode != 0 || disk.DecodeRecLen(fake.RecLen, c.bs) != c.bs || fake.NameLen != 0 {
			c.add(d.ino, cphys, "htree node: bad header entry (inode %d, rec_len %d)", fake.Inode, fake.RecLen)
			ok = false
			continue
		}
		if !c.dxNode(d, child, cphys, disk.DxNodeEntries, level-1, cr, visit, blocks) {
			ok = false
		}
	}
	return ok
}

// dotsOfRoot checks "." and ".." of a dx root block.
func (c *checker) dotsOfRoot(d *dirWalk, b []byte, phys uint64) {
	dot := disk.DecodeDirent(b)
	dotdot := disk.DecodeDirent(b[12:])
	if dot.Inode != d.ino || dot.NameLen != 1 || b[8] != '.' || disk.DecodeRecLen(dot.RecLen, c.bs) != 12 {
		c.add(d.ino, phys, "htree root: bad '.' entry")
	} else {
		c.entry(d, ".", dot.Inode, dot.FileType, phys)
	}
	if dotdot.NameLen != 2 || b[20] != '.' || b[21] != '.' || disk.DecodeRecLen(dotdot.RecLen, c.bs) != c.bs-12 {
		c.add(d.ino, phys, "htree root: bad '..' entry")
	} else {
		c.entry(d, "..", dotdot.Inode, dotdot.FileType, phys)
	}
}

// leaf parses one directory leaf block. dots says it starts with "." and
// "..". r, when set, bounds the names' hashes.
func (c *checker) leaf(d *dirWalk, lblk uint32, phys uint64, b []byte, dots bool, r *hashRange) {
	end := c.bs
	if c.csum {
		if !disk.HasDirTail(b) {
			c.add(d.ino, phys, "directory block %d has no checksum tail", lblk)
		} else {
			end -= disk.DirTailSize
			if got, want := disk.StoredDirTailChecksum(b), disk.DirBlockChecksum(d.seed, b); got != want {
				c.add(d.ino, phys, "directory block %d checksum %#x, computed %#x", lblk, got, want)
			}
		}
	}
	n := 0
	for p := 0; p < end; n++ {
		if p+disk.DirentHeaderSize > end {
			c.add(d.ino, phys, "directory block %d: entry header at %d past the end", lblk, p)
			return
		}
		de := disk.DecodeDirent(b[p:])
		rl := disk.DecodeRecLen(de.RecLen, c.bs)
		if rl < 12 || rl%4 != 0 || p+rl > end || disk.DirentHeaderSize+int(de.NameLen) > rl {
			c.add(d.ino, phys, "directory block %d: entry at %d has rec_len %d, name_len %d", lblk, p, rl, de.NameLen)
			return
		}
		name := string(b[p+disk.DirentHeaderSize : p+disk.DirentHeaderSize+int(de.NameLen)])
		p += rl
		if dots && n < 2 {
			want := [2]string{".", ".."}[n]
			if name != want || de.Inode == 0 {
				c.add(d.ino, phys, "entry %d of the first block is %q, want %q", n, name, want)
				continue
			}
			if n == 0 && de.Inode != d.ino {
				c.add(d.ino, phys, "'.' points at inode %d", de.Inode)
				continue
			}
			c.entry(d, name, de.Inode, de.FileType, phys)
			continue
		}
		if de.Inode == 0 {
			continue
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			c.add(d.ino, phys, "directory block %d: bad name %q", lblk, name)
			continue
		}
		if r != nil {
			h, _, ok := disk.DirHash(d.hver, []byte(name), c.sb.HashSeed)
			if ok && !r.holds(h) {
				c.add(d.ino, phys, "htree leaf %d: %q hashes to %#x, outside [%#x, %#x)", lblk, name, h, r.lo, r.hi)
			}
		}
		if d.names[name] {
			c.add(d.ino, phys, "duplicate entry %q", name)
			continue
		}
		if len(d.names) < 1<<22 {
			d.names[name] = true
		}
		c.entry(d, name, de.Inode, de.FileType, phys)
	}
}

// entry records one directory entry and checks its target.
func (c *checker) entry(d *dirWalk, name string, target uint32, ft uint8, phys uint64) {
	if name == "." || name == ".." {
		d.dots++
	}
	if target > c.sb.InodesCount {
		c.add(d.ino, phys, "entry %q points at inode %d (of %d)", name, target, c.sb.InodesCount)
		return
	}
	t := c.inodes[target]
	if t == nil || (target < c.sb.FirstIno && target != disk.RootIno) {
		c.add(d.ino, phys, "entry %q points at unused or reserved inode %d", name, target)
		return
	}
	if c.filetype {
		if want := disk.FileTypeOfMode(t.mode); ft != want {
			c.add(d.ino, phys, "entry %q has file type %d, inode %d is a %s", name, ft, target, typeWord(uint32(t.mode)&disk.ModeTypeMask))
		}
	} else if ft != 0 {
		c.add(d.ino, phys, "entry %q has file type %d without the filetype feature", name, ft)
	}
	c.counted[target]++
	isDir := t.mode&disk.ModeTypeMask == disk.ModeDir
	switch {
	case name == ".":
	case name == "..":
		if !isDir {
			c.add(d.ino, phys, "'..' points at inode %d, not a directory", target)
			return
		}
		d.ci.parent = target
	default:
		if isDir {
			if p, dup := c.named[target]; dup || target == disk.RootIno {
				c.add(d.ino, phys, "entry %q is a second link to directory %d (first in %d)", name, target, p)
				return
			}
			c.named[target] = d.ino
		}
		if len(c.children[d.ino]) < 1<<24 {
			c.children[d.ino] = append(c.children[d.ino], target)
		}
	}
}

// links checks reachability, ".." entries, link counts and lost+found.
func (c *checker) links() {
	root := c.inodes[disk.RootIno]
	if root == nil {
		return
	}
	// Breadth-first from the root; each directory is entered once.
	queue := []uint32{disk.RootIno}
	root.reached = true
	for len(queue) > 0 {
		ino := queue[0]
		queue = queue[1:]
		for _, t := range c.children[ino] {
			ci := c.inodes[t]
			if ci == nil || ci.reached {
				continue
			}
			ci.reached = true
			if ci.mode&disk.ModeTypeMask == disk.ModeDir {
				queue = append(queue, t)
			}
		}
	}
	inos := make([]uint32, 0, len(c.inodes))
	for ino := range c.inodes {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		ci := c.inodes[ino]
		if ino < c.sb.FirstIno && ino != disk.RootIno {
			continue
		}
		isDir := ci.mode&disk.ModeTypeMask == disk.ModeDir
		if c.orphans[ino] && ci.links == 0 {
			if c.counted[ino] != 0 {
				c.add(ino, 0, "orphan with no links is named by %d directory entries", c.counted[ino])
			}
			continue
		}
		if !ci.reached {
			c.add(ino, 0, "in use (%d links) but not reachable from the root", ci.links)
		}
		if isDir && ci.extOK {
			want := c.named[ino]
			if ino == disk.RootIno {
				want = disk.RootIno
			}
			if ci.parent != want && want != 0 {
				c.add(ino, 0, "'..' is %d, but the directory is named in %d", ci.parent, want)
			}
		}
		counted := c.counted[ino]
		// dir_nlink: a directory past EXT4_LINK_MAX links counts 1. The
		// kernel sets 1 on an indexed directory as it reaches the limit
		// and never raises it again; e2fsck accepts 1 on any indexed
		// directory.
		if isDir && ci.links == 1 && counted > 1 && (counted > disk.MaxLinks || ci.flags&disk.FlagIndex != 0) {
			counted = 1
		}
		if uint32(ci.links) != counted && (!isDir || ci.extOK) {
			c.add(ino, 0, "link count %d, counted %d", ci.links, counted)
		}
	}
	lf := uint32(0)
	if root.extOK {
		lf = c.lostFound()
	}
	if lf == 0 {
		c.add(disk.RootIno, 0, "/lost+found not found")
	}
}

// lostFound finds /lost+found by reading the root again (entry names are
// not kept).
func (c *checker) lostFound() uint32 {
	root := c.inodes[disk.RootIno]
	found := uint32(0)
	b := make([]byte, c.bs)
	for _, e := range root.ext {
		for i := uint32(0); i < uint32(e.Len) && found == 0 && !c.stop; i++ {
			if e.Uninit || !c.readBlock(e.Start+uint64(i), b, disk.RootIno, "root directory block") {
				break
			}
			end := c.bs
			for p := 0; p+disk.DirentHeaderSize <= end; {
				de := disk.DecodeDirent(b[p:])
				rl := disk.DecodeRecLen(de.RecLen, c.bs)
				if rl < disk.DirentHeaderSize || p+rl > end || disk.DirentHeaderSize+int(de.NameLen) > rl {
					break
				}
				if de.Inode != 0 && string(b[p+8:p+8+int(de.NameLen)]) == "lost+found" {
					if t := c.inodes[de.Inode]; t != nil && t.mode&disk.ModeTypeMask == disk.ModeDir {
						found = de.Inode
					}
					break
				}
				p += rl
			}
		}
	}
	return found
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
	c.rep.Blocks = c.blocks - c.fdb - freeBlocks
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
