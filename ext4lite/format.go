package ext4lite

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
	"z.gfire.dev/gvx/sink"
)

// CreateOptions shape a new volume. The zero value gives Debian's
// mkfs.ext4 defaults: 4 KiB blocks, 256-byte inodes, one inode per 16 KiB,
// flex_bg 16, a journal sized as mkfs sizes it.
type CreateOptions struct {
	Options
	BlockSize  int    // 1024, 2048 or 4096 (default 4096)
	InodeRatio int    // bytes per inode (default 16384)
	Inodes     uint32 // minimum inode count (overrides InodeRatio when larger)
	Label      string // volume label (up to 16 bytes)
	// UUID fixes the filesystem UUID; nil draws a random one. The htree hash
	// seed is derived from it, so a fixed UUID (with a fixed Time) makes
	// the same operations produce the same bytes.
	UUID *[16]byte
	Time time.Time // creation time (mkfs time, root directory times); default Now
	// JournalBlocks is the journal's size in blocks: 0 chooses mkfs.ext4's
	// default for the volume size, -1 makes no journal.
	JournalBlocks int
	// Overwrite allows replacing an existing file.
	Overwrite bool
	// RootUID and RootGID own the root directory.
	RootUID, RootGID uint32
	// BulkLoad is for a volume filled before anyone uses it (an import
	// into a new file that is published afterwards, as CreateFilled
	// does). Until Close, each flush writes the metadata home without a
	// journal transaction and without flushing the device, and the
	// superblock on disk has no magic (nor are backup superblocks
	// written), so a crash or kill before Close leaves a file that
	// ext4lite, e2fsck and the kernel refuse as not ext4, never a half
	// volume that looks valid. Close writes everything, flushes the
	// device, then writes the superblocks and flushes again. Sync before
	// Close makes nothing durable. The volume keeps its journal (empty)
	// for every later open.
	BulkLoad bool
}

// Default features, those of Debian's mkfs.ext4 (minus resize_inode: an
// image file grows by being re-created, not by resize2fs).
const (
	defaultCompat   = disk.CompatHasJournal | disk.CompatExtAttr | disk.CompatDirIndex
	defaultIncompat = disk.IncompatFiletype | disk.IncompatExtents | disk.Incompat64bit | disk.IncompatFlexBG
	defaultROCompat = disk.ROCompatSparseSuper | disk.ROCompatLargeFile | disk.ROCompatHugeFile |
		disk.ROCompatDirNlink | disk.ROCompatExtraIsize | disk.ROCompatMetadataCsum
	logGroupsPerFlex = 4 // flex_bg of 16 groups
	inodeSize        = 256
)

// Create formats a new volume of size bytes in a sparse file at path and
// returns it open for writing.
func Create(path string, size int64, opts *CreateOptions) (*FS, error) {
	var o CreateOptions
	if opts != nil {
		o = *opts
	}
	flag := os.O_RDWR | os.O_CREATE | os.O_EXCL
	if o.Overwrite {
		flag = os.O_RDWR | os.O_CREATE // truncated once locked: never a volume in use
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		return nil, err
	}
	if o.Overwrite {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	// The file gets its size first: formatting reads blocks it patches.
	err = f.Truncate(size)
	var v *FS
	if err == nil {
		v, err = format(f, size, &o)
	}
	if err == nil {
		err = f.Truncate(int64(v.blocksCount) * int64(v.bs))
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	v.file = f
	return v, nil
}

// Format writes a new volume of size bytes onto dev (whose bytes must read
// as zeros) and returns it open for writing.
func Format(dev Device, size int64, opts *CreateOptions) (*FS, error) {
	var o CreateOptions
	if opts != nil {
		o = *opts
	}
	return format(dev, size, &o)
}

func defaultJournalBlocks(blocks uint64) int {
	switch {
	case blocks < 2048:
		return -1
	case blocks < 32768:
		return 1024
	case blocks < 256*1024:
		return 4096
	case blocks < 512*1024:
		return 8192
	case blocks < 4096*1024:
		return 16384
	case blocks < 8192*1024:
		return 32768
	case blocks < 16384*1024:
		return 65536
	case blocks < 32768*1024:
		return 131072
	}
	return 262144
}

func format(dev Device, size int64, o *CreateOptions) (*FS, error) {
	bs := o.BlockSize
	if bs == 0 {
		bs = 4096
	}
	if bs != 1024 && bs != 2048 && bs != 4096 {
		return nil, fmt.Errorf("%w: block size %d (want 1024, 2048 or 4096)", ErrUnsupported, bs)
	}
	ratio := o.InodeRatio
	if ratio == 0 {
		ratio = 16384
	}
	if ratio < bs || ratio > 64<<20 {
		return nil, fmt.Errorf("inode ratio %d out of range (%d..%d)", ratio, bs, 64<<20)
	}
	if len(o.Label) > 16 {
		return nil, fmt.Errorf("label %q longer than 16 bytes", o.Label)
	}
	now := o.Time
	if now.IsZero() {
		now = time.Now()
	}
	var fdb uint64
	if bs == 1024 {
		fdb = 1
	}
	blocks := uint64(size) / uint64(bs)
	bpg := uint64(bs * 8)
	// A last group too small to hold anything useful is dropped, as mkfs
	// does.
	if rem := (blocks - fdb) % bpg; blocks > bpg && rem != 0 && rem < 256 {
		blocks -= rem
	}
	const minBlocks = 64
	if blocks < minBlocks || blocks > 1<<48 {
		return nil, fmt.Errorf("volume size %d bytes out of range (%d bytes to 1 EiB)", size, minBlocks*bs)
	}
	groups := (blocks - fdb + bpg - 1) / bpg
	inodesPerBlock := uint64(bs / inodeSize)
	ipg := (bpg * uint64(bs) / uint64(ratio))
	if o.Inodes > 0 {
		ipg = max(ipg, (uint64(o.Inodes)+groups-1)/groups)
	}
	ipg = max(ipg, 16)
	ipg = (ipg + inodesPerBlock - 1) / inodesPerBlock * inodesPerBlock // whole table blocks
	ipg = (ipg + 7) &^ 7
	ipg = min(ipg, uint64(bs*8))
	if groups*ipg >= 1<<32 {
		ipg = ((1<<32)-1)/groups&^7 - 0
		ipg = ipg / inodesPerBlock * inodesPerBlock
	}

	var uuid [16]byte
	if o.UUID != nil {
		uuid = *o.UUID
	} else if _, err := rand.Read(uuid[:]); err != nil {
		return nil, err
	} else {
		uuid[6] = uuid[6]&0x0f | 0x40 // version 4
		uuid[8] = uuid[8]&0x3f | 0x80
	}
	seedSum := sha256.Sum256(append([]byte("gvx-ext4lite-hash-seed"), uuid[:]...))
	sb := &disk.Superblock{
		InodesCount:      uint32(groups * ipg),
		FirstDataBlock:   uint32(fdb),
		LogBlockSize:     uint32(bs>>10) / 2, // 1024→0, 2048→1, 4096→2
		LogClusterSize:   uint32(bs>>10) / 2,
		BlocksPerGroup:   uint32(bpg),
		ClustersPerGroup: uint32(bpg),
		InodesPerGroup:   uint32(ipg),
		Magic:            disk.Magic,
		State:            disk.StateValid,
		Errors:           1, // continue
		MaxMntCount:      -1,
		RevLevel:         1,
		FirstIno:         disk.GoodOldFirstIno,
		InodeSize:        inodeSize,
		FeatureCompat:    defaultCompat,
		FeatureIncompat:  defaultIncompat,
		FeatureROCompat:  defaultROCompat,
		UUID:             uuid,
		DefHashVersion:   disk.HashHalfMD4,
		DescSize:         disk.GroupDescSize64,
		DefaultMountOpts: 0x0C, // user_xattr, acl
		MinExtraIsize:    disk.InodeExtraSize,
		WantExtraIsize:   disk.InodeExtraSize,
		Flags:            disk.FlagSignedHash,
		LogGroupsPerFlex: logGroupsPerFlex,
		ChecksumType:     disk.ChecksumCRC32c,
	}
	if bs == 2048 {
		sb.LogBlockSize, sb.LogClusterSize = 1, 1
	}
	copy(sb.VolumeName[:], o.Label)
	for i := range sb.HashSeed {
		sb.HashSeed[i] = binary.LittleEndian.Uint32(seedSum[4*i:])
	}
	sec, _ := disk.EncodeTime(now)
	sb.MkfsTime, sb.Wtime, sb.Lastcheck = sec, sec, sec
	sb.SetBlocksCount(blocks)
	sb.SetRBlocksCount(0)
	journal := o.JournalBlocks
	if journal == 0 {
		journal = defaultJournalBlocks(blocks)
	}
	if journal < 0 {
		sb.FeatureCompat &^= disk.CompatHasJournal
	} else if journal < jbd2.MinBlocks {
		return nil, fmt.Errorf("journal of %d blocks is below the minimum of %d", journal, jbd2.MinBlocks)
	}

	v := &FS{dev: dev, opts: o.Options, inodes: map[uint32]*inode{}, dirs: map[uint32]*dir{}, meta: map[uint64][]byte{}, bulk: o.BulkLoad}
	v.opts.ReadOnly = false
	raw := sb.Encode()
	if err := v.loadSuperblock(sb, raw); err != nil {
		return nil, err
	}
	if err := v.layoutGroups(); err != nil {
		return nil, err
	}
	if err := v.makeRoot(now, o.RootUID, o.RootGID); err != nil {
		return nil, err
	}
	lf := &sink.Header{Path: "lost+found", Mode: sink.TypeDir | 0o700, Atime: now, Mtime: now, Ctime: now, Crtime: now}
	if err := v.Mkdir(lf); err != nil {
		return nil, err
	}
	if journal > 0 {
		if err := v.makeJournal(uint32(journal), now); err != nil {
			return nil, err
		}
	}
	// The root's times are the creation time, not the time lost+found was
	// linked into it.
	root := v.inodes[disk.RootIno]
	v.setTimes(root, now, now, now, now)
	if err := v.flushMetadata(); err != nil {
		return nil, err
	}
	if !v.bulk {
		if err := v.writeBackupSuperblocks(); err != nil {
			return nil, err
		}
	}
	v.sb.State &^= disk.StateValid // in use until Close
	if err := v.openJournal(); err != nil {
		return nil, err
	}
	return v, nil
}

// layoutGroups builds every group's descriptor and bitmaps, placing each
// flex group's bitmaps and inode tables at its first group, as mkfs does.
func (v *FS) layoutGroups() error {
	v.gdtBlocks = uint32((uint64(v.groupCount)*uint64(v.descSize) + uint64(v.bs) - 1) / uint64(v.bs))
	v.groups = make([]*group, v.groupCount)
	for g := uint32(0); g < v.groupCount; g++ {
		gr := &group{desc: &disk.GroupDesc{}, raw: make([]byte, v.descSize), blockBitmap: make([]byte, v.bs), inodeBitmap: make([]byte, v.bs),
			bbDirty: true, ibDirty: true, descDirty: true}
		over := v.superOverhead(g)
		for i := uint32(0); i < over; i++ {
			setBit(gr.blockBitmap, i)
		}
		for i := v.groupBlocks(g); i < uint32(v.bs*8); i++ {
			setBit(gr.blockBitmap, i)
		}
		for i := v.inodesPerGroup; i < uint32(v.bs*8); i++ {
			setBit(gr.inodeBitmap, i)
		}
		if v.groupBlocks(g) <= over {
			return fmt.Errorf("volume too small: group %d has no room past its superblock copy", g)
		}
		gr.desc.SetFreeBlocks(v.groupBlocks(g) - over)
		gr.desc.SetFreeInodes(v.inodesPerGroup)
		gr.desc.SetItableUnused(v.inodesPerGroup)
		gr.desc.Flags = disk.BGInodeZeroed
		v.groups[g] = gr
	}
	itb := int((uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs))
	flex := uint32(1) << v.sb.LogGroupsPerFlex
	// alloc places n contiguous blocks at goal or, when the rest of that
	// group cannot hold them (dense inode tables fill whole groups), at
	// the start of the next group that can.
	alloc := func(goal uint64, n int) (uint64, error) {
		for tries := uint32(0); tries <= v.groupCount; tries++ {
			start, got, err := v.allocBlocks(goal, n)
			if err != nil {
				return 0, err
			}
			if got == n {
				return start, nil
			}
			if err := v.freeBlocks(start, uint64(got)); err != nil {
				return 0, err
			}
			g := uint32((start-v.firstDataBlock)/uint64(v.blocksPerGroup)) + 1
			if g >= v.groupCount {
				break
			}
			goal = v.groupFirstBlock(g) + uint64(v.superOverhead(g))
		}
		return 0, fmt.Errorf("volume too small for its metadata (%d contiguous blocks wanted)", n)
	}
	for f := uint32(0); f < v.groupCount; f += flex {
		end := min(f+flex, v.groupCount)
		goal := v.groupFirstBlock(f) + uint64(v.superOverhead(f))
		bbs, err := alloc(goal, int(end-f))
		if err != nil {
			return err
		}
		ibs, err := alloc(bbs+uint64(end-f), int(end-f))
		if err != nil {
			return err
		}
		next := ibs + uint64(end-f)
		for g := f; g < end; g++ {
			it, err := alloc(next, itb)
			if err != nil {
				return err
			}
			next = it + uint64(itb)
			v.groups[g].desc.SetLocations(bbs+uint64(g-f), ibs+uint64(g-f), it)
		}
	}
	// Reserved inodes 1..first_ino-1 are in use.
	g0 := v.groups[0]
	for i := uint32(0); i < v.sb.FirstIno-1; i++ {
		setBit(g0.inodeBitmap, i)
	}
	g0.desc.SetFreeInodes(v.inodesPerGroup - (v.sb.FirstIno - 1))
	g0.desc.SetItableUnused(v.inodesPerGroup - (v.sb.FirstIno - 1))
	v.allocCursor = 0
	return nil
}

// makeRoot creates inode 2, the root directory.
func (v *FS) makeRoot(now time.Time, uid, gid uint32) error {
	in := &inode{ino: disk.RootIno, slot: make([]byte, v.inodeSize), xattrsOK: true, dirty: true}
	in.d.Mode = disk.ModeDir | 0o755
	in.d.SetOwner(uid, gid)
	in.d.LinksCount = 2
	in.d.ExtraIsize = disk.InodeExtraSize
	in.d.Flags = disk.FlagExtents
	in.ext = &extentMap{dirty: true}
	v.setTimes(in, now, now, now, now)
	v.inodes[disk.RootIno] = in
	g0 := v.groups[0]
	g0.desc.SetUsedDirs(1)
	v.newDir(disk.RootIno, disk.RootIno)
	return nil
}

// makeJournal allocates inode 8's blocks contiguously and writes a clean
// jbd2 superblock.
func (v *FS) makeJournal(n uint32, now time.Time) error {
	in := &inode{ino: disk.JournalIno, slot: make([]byte, v.inodeSize), xattrsOK: true, dirty: true}
	in.d.Mode = disk.ModeReg | 0o600
	in.d.LinksCount = 1
	in.d.ExtraIsize = disk.InodeExtraSize
	in.d.Flags = disk.FlagExtents
	in.ext = &extentMap{dirty: true}
	v.setTimes(in, now, now, now, time.Unix(0, 0))
	v.inodes[disk.JournalIno] = in
	// Put the journal in the middle of the volume as mkfs does, so it
	// stays clear of the metadata at the front.
	goal := v.groupFirstBlock(v.groupCount/2) + uint64(v.superOverhead(v.groupCount/2))
	if v.groupCount > 1 {
		goal = v.groupFirstBlock(v.groupCount/2) + uint64(v.superOverhead(v.groupCount/2))
	}
	for got := uint32(0); got < n; {
		start, k, err := v.allocBlocks(goal, int(min(n-got, disk.ExtentInitMaxLen)))
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		in.ext.insert(got, start, uint32(k))
		got += uint32(k)
		goal = start + uint64(k)
	}
	in.d.SetSize(uint64(n) * uint64(v.bs))
	if err := jbd2.Format(&journalDev{v: v, in: in}, v.bs, n, jbd2.FormatOptions{UUID: v.sb.UUID}); err != nil {
		return err
	}
	if err := v.storeExtents(in); err != nil {
		return err
	}
	v.sb.JournalInum = disk.JournalIno
	v.sb.JnlBackupType = 1 // EXT3_JNL_BACKUP_BLOCKS
	for i := 0; i < disk.NBlocks; i++ {
		v.sb.JnlBlocks[i] = binary.LittleEndian.Uint32(in.d.Block[4*i:])
	}
	v.sb.JnlBlocks[15] = in.d.SizeHigh
	v.sb.JnlBlocks[16] = in.d.SizeLo
	return nil
}
