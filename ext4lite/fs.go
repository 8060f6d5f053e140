package ext4lite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
)

// Features ext4lite reads and writes. A volume with any other incompat
// feature is refused; with any other ro_compat feature it opens read-only.
const (
	supportedIncompat = disk.IncompatFiletype | disk.IncompatExtents | disk.Incompat64bit |
		disk.IncompatFlexBG | disk.IncompatCsumSeed | disk.IncompatRecover
	supportedROCompat = disk.ROCompatSparseSuper | disk.ROCompatLargeFile | disk.ROCompatHugeFile |
		disk.ROCompatGdtCsum | disk.ROCompatDirNlink | disk.ROCompatExtraIsize |
		disk.ROCompatMetadataCsum | disk.ROCompatBtreeDir
)

// FS is an open ext4 volume. Its methods are safe for concurrent use; one
// lock serializes them.
type FS struct {
	mu       sync.Mutex
	dev      Device
	file     *os.File // non-nil when FS owns an open file
	readOnly bool
	closed   bool

	sb             *disk.Superblock
	bs             int    // block size in bytes
	blocksCount    uint64 // s_blocks_count
	firstDataBlock uint64
	blocksPerGroup uint32
	inodesPerGroup uint32
	inodeSize      int
	descSize       int
	groupCount     uint32
	gdtBlocks      uint32 // blocks of group descriptors in each copy
	csum           bool   // metadata_csum
	gdtCsum        bool   // uninit_bg (crc16 descriptors)
	seed           uint32 // checksum seed
	hashVersion    uint8  // default htree hash, signedness applied
	hashSeed       [4]uint32

	groups []*group
	meta   map[uint64][]byte // staged metadata blocks (see device.go)

	journal *jbd2.Journal // nil without a journal (or while bulk)
	jdev    *journalDev   // the journal inode's blocks, under journal
	// superFirst makes a checkpoint write the superblock home durably
	// before the blocks after it: set while Shrink commits a new geometry
	// (shrink.go), so no crash leaves the old geometry over new descriptors.
	superFirst     bool
	movedLog       [][2]uint64 // journal blocks Shrink moved from, freed after the remap is home
	homeLast       *homeLast   // checkpoints write this block last (journal.go)
	bulk           bool        // CreateOptions.BulkLoad until Close (bulk.go)
	cachedDirents  int         // read-only: entries of the directories in dirs (inode.go)
	deferFree      bool        // hold freed blocks until the next commit
	pendingFree    [][2]uint64
	opsSinceFlush  int            // mutating operations since the last flush
	dirsSinceFlush int            // directories made since the last flush (a block each)
	refs           map[uint32]int // open references (Ref/Unref)
	// crashAfterCommit (tests only) stops a flush after its commit, before
	// the checkpoint: the log keeps a committed transaction.
	crashAfterCommit bool
	inodes           map[uint32]*inode
	dirs             map[uint32]*dir
	last             lastDir // the path API's last directory (path.go)

	buf         []byte // copy buffer for WriteFile
	scratch     []byte // writeFresh's partial blocks (file.go)
	allocCursor uint64 // next block to try when no better goal is known
	allocEnd    uint64 // nonzero while Shrink moves blocks: no block at or past it is allocated
	inodeCursor uint32 // group to try first for new inodes
	cleanAtOpen bool   // s_state had EXT4_VALID_FS when opened
	short       bool   // the device ends before the last block (read-only opens only)
	// journalAborted says why the replay at open cut the log short (a
	// committed transaction failed a checksum); empty otherwise.
	journalAborted string
	opts           Options
}

// Open opens the volume in the file at path. With ReadOnly unset the file
// is opened for writing and the volume is marked in use until Close.
func Open(path string, opts *Options) (*FS, error) {
	o := opts.orDefault()
	flag := os.O_RDWR
	if o.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		if err := lockFile(f, true); err != nil {
			f.Close()
			return nil, err
		}
	}
	v, err := OpenDevice(f, &o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.file = f
	return v, nil
}

// OpenDevice opens the volume held by dev.
func OpenDevice(dev Device, opts *Options) (*FS, error) {
	o := opts.orDefault()
	v := &FS{dev: dev, readOnly: o.ReadOnly, opts: o,
		inodes: map[uint32]*inode{}, dirs: map[uint32]*dir{}, meta: map[uint64][]byte{}}
	buf := make([]byte, disk.SuperblockSize)
	if n, err := dev.ReadAt(buf, disk.SuperblockOffset); n != len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: file too small to hold a superblock", ErrNotExt4)
		}
		return nil, err
	}
	sb, err := disk.DecodeSuperblock(buf)
	if err != nil {
		return nil, err
	}
	if sb.Magic != disk.Magic {
		return nil, fmt.Errorf("%w: no ext2/3/4 superblock magic at byte 1080", ErrNotExt4)
	}
	if err := v.loadSuperblock(sb, buf); err != nil {
		return nil, err
	}
	if err := v.probeEnd(); err != nil {
		return nil, err
	}
	if err := v.loadGroupDescs(); err != nil {
		return nil, err
	}
	v.cleanAtOpen = v.sb.State&disk.StateValid != 0 && v.sb.FeatureIncompat&disk.IncompatRecover == 0
	if v.sb.FeatureIncompat&disk.IncompatRecover != 0 {
		if err := v.recover(); err != nil {
			return nil, err
		}
	}
	if !v.readOnly {
		v.sb.State &^= disk.StateValid
		if err := v.openJournal(); err != nil {
			return nil, err
		}
		if err := v.cleanOrphans(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *FS) loadSuperblock(sb *disk.Superblock, raw []byte) error {
	if sb.FeatureROCompat&disk.ROCompatMetadataCsum != 0 {
		if sb.ChecksumType != disk.ChecksumCRC32c {
			return corruptf(disk.SuperblockOffset, 0, "unknown checksum type %d", sb.ChecksumType)
		}
		if got := disk.SuperblockChecksum(raw); got != sb.Checksum {
			return corruptf(disk.SuperblockOffset, 0, "superblock checksum %#x, computed %#x", sb.Checksum, got)
		}
	}
	if sb.RevLevel < 1 {
		return fmt.Errorf("%w: revision 0 (ext2 good-old) filesystems", ErrUnsupported)
	}
	if bad := sb.FeatureIncompat &^ supportedIncompat; bad != 0 {
		return fmt.Errorf("%w: incompatible feature(s) %s", ErrUnsupported, disk.FeatureString(bad.Names()))
	}
	if sb.FeatureROCompat&disk.ROCompatOrphanPresent != 0 && !v.readOnly {
		// A read-write open would have to free the orphan file's inodes
		// first, as Linux and e2fsck do; ext4lite frees only the
		// s_last_orphan chain's (cleanOrphans).
		return fmt.Errorf("%w: read-only-compatible feature orphan_present: the orphan file (inode %d) lists files unlinked while open, "+
			"which ext4lite does not free (mount the volume once with Linux or run e2fsck -fy on it; or open it read-only)", ErrUnsupported, sb.OrphanFileInum)
	}
	if bad := sb.FeatureROCompat &^ supportedROCompat; bad != 0 && !v.readOnly {
		return fmt.Errorf("%w: read-only-compatible feature(s) %s (open read-only to read it)", ErrUnsupported, disk.FeatureString(bad.Names()))
	}
	if sb.FeatureIncompat&disk.IncompatExtents == 0 && !v.readOnly {
		return fmt.Errorf("%w: volumes without the extent feature (ext2/ext3 block maps) can only be opened read-only", ErrUnsupported)
	}
	if sb.FeatureIncompat&disk.IncompatMetaBG != 0 {
		return fmt.Errorf("%w: meta_bg", ErrUnsupported)
	}
	g, err := sb.Geometry()
	if err != nil {
		return geometryErr(err, "")
	}
	v.sb = sb
	v.bs = g.BlockSize
	v.blocksCount = g.Blocks
	v.firstDataBlock = g.FirstDataBlock
	v.blocksPerGroup = g.BlocksPerGroup
	v.inodesPerGroup = g.InodesPerGroup
	v.inodeSize = g.InodeSize
	v.groupCount = g.Groups
	v.descSize = g.DescSize
	v.gdtBlocks = g.GDTBlocks
	v.csum, v.gdtCsum, v.seed = g.Csum, g.GdtCsum, g.Seed
	v.hashSeed = sb.HashSeed
	v.hashVersion = sb.DefHashVersion
	if v.hashVersion <= disk.HashTea && sb.Flags&disk.FlagUnsignedHash != 0 {
		v.hashVersion += 3
	}
	return nil
}

// geometryErr turns a disk.GeometryError into ext4lite's errors: a
// corrupt superblock, or ErrUnsupported; prefix names the caller ("check
// of " for Check).
func geometryErr(err error, prefix string) error {
	var ge *disk.GeometryError
	if errors.As(err, &ge) && ge.Unsupported {
		return fmt.Errorf("%w: %s%s", ErrUnsupported, prefix, ge.Msg)
	}
	return corruptf(disk.SuperblockOffset, 0, "superblock: %v", err)
}

// probeEnd reads the filesystem's last block: a device that ends before
// it (a truncated file, a short copy) is refused for writing, as the
// kernel refuses to mount it and e2fsck to check it; read-only, it opens
// so what is there can be read, and Info reports it.
func (v *FS) probeEnd() error {
	last := make([]byte, v.bs)
	n, err := v.dev.ReadAt(last, int64(v.blocksCount-1)*int64(v.bs))
	if n == len(last) {
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	v.short = true
	if v.readOnly {
		return nil
	}
	return corruptf(-1, 0, "the filesystem has %d blocks of %d bytes (%d bytes) but the file is shorter: truncated (open it read-only to read what is left)",
		v.blocksCount, v.bs, v.blocksCount*uint64(v.bs))
}

// Sync writes every pending change to the device and flushes it.
func (v *FS) Sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.syncLocked()
}

func (v *FS) syncLocked() error {
	if v.closed {
		return ErrClosed
	}
	if v.readOnly {
		return nil
	}
	return v.flushMetadata()
}

// Close writes pending changes, marks the volume clean and closes it.
func (v *FS) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	var err error
	if !v.readOnly {
		// The last transaction, then the clean state written home directly:
		// the log is empty, nothing needs recovery.
		v.sb.State |= disk.StateValid
		err = v.releaseOrphans()
		if err == nil {
			err = v.flushMetadata()
		}
		if err == nil && v.bulk {
			err = v.endBulk()
		}
		if err == nil {
			v.sb.FeatureIncompat &^= disk.IncompatRecover
			err = v.writeAt(v.superBytes(), disk.SuperblockOffset)
		}
		if err == nil {
			err = v.writeBackupSuperblocks()
		}
		if err == nil {
			err = v.forceSyncDevice() // NoSync too: a closed volume is durable
		}
	}
	v.closed = true
	if v.file != nil {
		if cerr := v.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// BlockSize is the volume's block size in bytes.
func (v *FS) BlockSize() int { return v.bs }
