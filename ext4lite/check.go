package ext4lite

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// CheckOptions bound a consistency check. The zero value (or nil) is valid.
type CheckOptions struct {
	// MaxFindings stops recording findings after this many (default 200);
	// CheckReport.Omitted counts the rest.
	MaxFindings int
	// AllowOrphans accepts orphans (files unlinked while open) without a
	// finding, for checking a volume in use: inodes on the s_last_orphan
	// chain or in the orphan file, and orphan_present set while the
	// orphan file is empty. By default they are reported, as e2fsck -fn
	// reports them: at rest, orphans mean a crash left work for the next
	// read-write open.
	AllowOrphans bool
	// Replayed says the device is FS.View of a read-only open that
	// replayed the journal in memory (Open with ReadOnly of a volume that
	// needs recovery): its superblock still says needs_recovery, as the
	// file does, and that is not a finding of the replayed volume.
	Replayed bool
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
	Blocks   uint64    `json:"blocks"`            // blocks in use (metadata and data; block 0 of a 1 KiB volume too, as e2fsck counts)
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
// lost+found, the journal superblock, the orphan list and the orphan file
// (orphan_file: its inode, block tails and entries).
//
// It shares with the reader and writer what decodes and validates the
// structures: internal/disk's decoders, the superblock's geometry
// (disk.Superblock.Geometry: one set of rules for sane block, group and
// inode counts) and the extent-node decoder (decodeExtentNode). What it
// adds is the cross-structure accounting the reader does not do (every
// block claimed once, bitmaps equal to what is in use, link counts,
// reachability). It is cross-checked against e2fsck in the tests: for
// every corruption e2fsck -fn reports, Check reports something too. The
// passes live in files by structure: check_super.go (superblock,
// descriptors, bitmaps), check_inode.go, check_xattr.go, check_dir.go,
// check_links.go, check_journal.go (journal), check_orphan.go (orphan list
// and orphan file).
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
		c.replayed = opts.Replayed
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
		disk.CompatFastCommit | disk.CompatStableInodes | disk.CompatOrphanFile
	checkIncompat = supportedIncompat
	checkROCompat = supportedROCompat | disk.ROCompatOrphanPresent
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
	orphanFile     bool // orphan_file, with a usable s_orphan_file_inum
	orphanPresent  bool // orphan_present
	replayed       bool // CheckOptions.Replayed

	gds     []*disk.GroupDesc
	claimed [][]byte // per group: blocks found in use
	budget  int64    // block claims left before the check gives up

	inodes  map[uint32]*cInode
	xattrs  map[uint64]*cXattrBlock
	orphans map[uint32]bool // on the s_last_orphan chain or in the orphan file

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

func (c *checker) readBlock(blk uint64, p []byte, ino uint32, what string) bool {
	if blk >= c.blocks {
		c.add(ino, blk, "%s: block past the end of the filesystem (%d blocks)", what, c.blocks)
		return false
	}
	return c.read(p[:c.bs], int64(blk)*int64(c.bs), ino, what)
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
	c.orphanFileInode()
	c.orphanFileEntries()
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
