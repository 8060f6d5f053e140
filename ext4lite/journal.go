package ext4lite

import (
	"errors"
	"fmt"
	"slices"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
)

// Journaling. Every flush (Sync, Close, or a staged batch growing large)
// is one jbd2 transaction holding every metadata block it changes; after
// the commit the blocks are written home and the log emptied
// (checkpointed), so the log never holds more than one transaction. The
// superblock says needs_recovery from just before a commit until its
// checkpoint: after a crash, ext4lite, e2fsck and the kernel all replay
// the last committed transaction.
//
// Blocks freed since the last commit stay allocated until the next one,
// so a crash can never leave committed metadata pointing at blocks that
// new data has overwritten.

// journalDev addresses the journal inode's blocks for jbd2.
type journalDev struct {
	v  *FS
	in *inode
	// pinned, when set, is the mapping on disk while Shrink moves the
	// journal (shrink.go): the flush that remaps the journal inode is
	// logged where the inode on disk says the log is, and its checkpoint
	// writes the inode's block last (home.last), so a replay after a crash
	// finds the log whichever mapping the inode table on disk holds.
	pinned *extentMap
}

// mapping is the journal's block map.
func (j *journalDev) mapping() (*extentMap, error) {
	if j.pinned != nil {
		return j.pinned, nil
	}
	return j.v.loadExtents(j.in)
}

func (j *journalDev) phys(n uint32) (uint64, error) {
	m, err := j.mapping()
	if err != nil {
		return 0, err
	}
	p, _, uninit, ok := m.lookup(n)
	if !ok || uninit {
		return 0, corruptf(-1, disk.JournalIno, "journal block %d is not mapped", n)
	}
	return p, nil
}

func (j *journalDev) ReadBlock(n uint32, p []byte) error {
	b, err := j.phys(n)
	if err != nil {
		return err
	}
	return j.v.readBlock(b, p)
}

func (j *journalDev) WriteBlock(n uint32, p []byte) error {
	b, err := j.phys(n)
	if err != nil {
		return err
	}
	if j.v.readOnly {
		// A read-only replay marks the log empty in memory only.
		j.v.meta[b] = slices.Clone(p[:j.v.bs])
		return nil
	}
	return j.v.writeBlock(b, p)
}

// WriteBlocks writes consecutive journal blocks, one pwrite per physically
// contiguous stretch (jbd2.RunWriter): the journal is allocated in a few
// large extents, so a commit costs a handful of writes, not one per block.
func (j *journalDev) WriteBlocks(n uint32, p []byte) error {
	bs := j.v.bs
	for len(p) > 0 {
		m, err := j.mapping()
		if err != nil {
			return err
		}
		phys, run, uninit, ok := m.lookup(n)
		if !ok || uninit {
			return corruptf(-1, disk.JournalIno, "journal block %d is not mapped", n)
		}
		k := min(int(run), len(p)/bs)
		if j.v.readOnly {
			for i := 0; i < k; i++ {
				j.v.meta[phys+uint64(i)] = slices.Clone(p[i*bs : (i+1)*bs])
			}
		} else {
			j.v.checkWriteBlock(phys + uint64(k) - 1)
			if err := j.v.writeAt(p[:k*bs], int64(phys)*int64(bs)); err != nil {
				return err
			}
		}
		p = p[k*bs:]
		n += uint32(k)
	}
	return nil
}

func (j *journalDev) NumBlocks() uint32 { return uint32(j.in.d.Size() / uint64(j.v.bs)) }

func (j *journalDev) Flush() error { return j.v.syncDevice() }

// home writes replayed or checkpointed blocks to their places.
type home struct{ v *FS }

// homeLast is a block a checkpoint writes after every other one is
// durable (FS.homeLast): the journal inode's, while Shrink moves the log.
type homeLast struct {
	blk  uint64
	data []byte // held back until Flush
}

func (h home) WriteHome(blk uint64, p []byte) error {
	if blk < h.v.firstDataBlock && h.v.firstDataBlock > 0 || blk >= h.v.blocksCount {
		return corruptf(-1, 0, "journal block for %d outside the filesystem", blk)
	}
	if l := h.v.homeLast; l != nil && blk == l.blk {
		l.data = slices.Clone(p[:h.v.bs])
		return nil
	}
	if _, err := h.v.dev.WriteAt(p[:h.v.bs], int64(blk)*int64(h.v.bs)); err != nil {
		return err
	}
	if h.v.superFirst && blk == disk.SuperblockOffset/uint64(h.v.bs) {
		// jbd2 checkpoints in block order: the superblock comes first.
		return h.v.syncDevice()
	}
	return nil
}

func (h home) Flush() error {
	if err := h.v.syncDevice(); err != nil {
		return err
	}
	if l := h.v.homeLast; l != nil && l.data != nil {
		if _, err := h.v.dev.WriteAt(l.data, int64(l.blk)*int64(h.v.bs)); err != nil {
			return err
		}
		l.data = nil
		return h.v.syncDevice()
	}
	return nil
}

// memHome replays into the staged metadata (read-only opens: the file is
// not touched, reads see the recovered state).
type memHome struct{ v *FS }

func (h memHome) WriteHome(blk uint64, p []byte) error {
	if blk >= h.v.blocksCount {
		return corruptf(-1, 0, "journal block for %d outside the filesystem", blk)
	}
	h.v.meta[blk] = slices.Clone(p[:h.v.bs])
	return nil
}

// syncDevice flushes the device to stable storage, unless Options.NoSync
// says not to (Close flushes with forceSyncDevice).
func (v *FS) syncDevice() error {
	if v.opts.NoSync {
		return nil
	}
	return v.forceSyncDevice()
}

func (v *FS) forceSyncDevice() error {
	if s, ok := v.dev.(syncer); ok {
		return s.Sync()
	}
	return nil
}

func (v *FS) journalDevice() (*journalDev, error) {
	if v.sb.FeatureCompat&disk.CompatHasJournal == 0 {
		return nil, nil
	}
	// An external journal (mkfs.ext4 -J device=): s_journal_inum 0, the
	// journal named by s_journal_uuid / s_journal_dev. Writing without it
	// would leave the volume's journal out of step with it.
	if v.sb.FeatureIncompat&disk.IncompatJournalDev != 0 || v.sb.JournalDev != 0 || v.sb.JournalInum == 0 && v.sb.JournalUUID != [16]byte{} {
		return nil, fmt.Errorf("%w: external journal (s_journal_uuid %x, s_journal_dev %#x); only a journal inode is supported (open it read-only to read a cleanly closed volume)",
			ErrUnsupported, v.sb.JournalUUID, v.sb.JournalDev)
	}
	if v.sb.JournalInum == 0 {
		return nil, corruptf(disk.SuperblockOffset, 0, "has_journal is set but s_journal_inum is 0 and no external journal is named")
	}
	in, err := v.getInode(v.sb.JournalInum)
	if err != nil {
		return nil, fmt.Errorf("journal inode: %w", err)
	}
	if in.fileType() != disk.ModeReg || in.d.Size() < uint64(jbd2.MinBlocks)*uint64(v.bs) {
		return nil, corruptf(-1, in.ino, "journal inode is not a regular file of at least %d blocks", jbd2.MinBlocks)
	}
	return &journalDev{v: v, in: in}, nil
}

// recover replays the journal of a volume that needs recovery: into the
// file when writable, else into the staged metadata only.
func (v *FS) recover() error {
	jd, err := v.journalDevice()
	if err != nil {
		return err
	}
	if jd == nil {
		return corruptf(disk.SuperblockOffset, 0, "needs_recovery set but the volume has no journal")
	}
	var hw jbd2.HomeWriter = home{v}
	if v.readOnly {
		hw = memHome{v}
	}
	st, err := jbd2.Recover(jd, v.bs, hw, v.blocksCount)
	if err != nil {
		return journalErr("replaying the journal", err)
	}
	// The replay may have rewritten the superblock and descriptors.
	buf := make([]byte, disk.SuperblockSize)
	if err := v.readAt(buf, disk.SuperblockOffset); err != nil {
		return err
	}
	sb, err := disk.DecodeSuperblock(buf)
	if err != nil {
		return err
	}
	if sb.Magic != disk.Magic {
		return corruptf(disk.SuperblockOffset, 0, "superblock lost its magic in journal replay")
	}
	if err := v.loadSuperblock(sb, buf); err != nil {
		return err
	}
	v.inodes = map[uint32]*inode{}
	v.dirs = map[uint32]*dir{}
	v.forgetPaths()
	if err := v.loadGroupDescs(); err != nil {
		return err
	}
	v.sb.FeatureIncompat &^= disk.IncompatRecover
	if st.Aborted != "" {
		// A committed transaction failed a checksum: the log was cut
		// there. Flag the volume as e2fsck does (s_state |= ERROR_FS),
		// so the next full check runs, and say so in Info.
		v.journalAborted = st.Aborted
		v.sb.State |= disk.StateErrors
	}
	if !v.readOnly {
		if err := v.writeAt(v.superBytes(), disk.SuperblockOffset); err != nil {
			return err
		}
		return v.syncDevice()
	}
	return nil
}

// openJournal makes the volume's journal ready for transactions.
func (v *FS) openJournal() error {
	jd, err := v.journalDevice()
	if err != nil {
		return err
	}
	if jd == nil || v.bulk {
		// No journal (or a bulk load): metadata is written home at each
		// flush; the state says "in use" until Close.
		return v.writeAt(v.superBytes(), disk.SuperblockOffset)
	}
	j, err := jbd2.Open(jd, v.bs)
	if err != nil {
		return journalErr("journal", err)
	}
	if j.NeedsRecovery() {
		// ext4lite sets needs_recovery durably before the journal points at
		// a transaction and clears it after the log is empty, so this is a
		// foreign or damaged volume: refuse rather than guess (e2fsck asks
		// too; Linux wipes the log).
		return corruptf(-1, disk.JournalIno, "journal holds transactions but needs_recovery is not set (run e2fsck to decide)")
	}
	j.SetClock(v.opts.now)
	if v.sb.FeatureIncompat&disk.Incompat64bit != 0 && v.csum {
		// What Linux sets at mount on a 64bit, metadata_csum volume.
		if err := j.SetFeatures(jbd2.KernelFeatures); err != nil {
			return journalErr("journal", err)
		}
	}
	v.journal, v.jdev = j, jd
	v.deferFree = true
	return v.writeAt(v.superBytes(), disk.SuperblockOffset)
}

// commitMeta writes the staged metadata: as one journal transaction,
// then home (checkpoint); without a journal, home directly.
func (v *FS) commitMeta() error {
	if len(v.meta) == 0 {
		return nil
	}
	blocks := make([]uint64, 0, len(v.meta))
	for b := range v.meta {
		blocks = append(blocks, b)
	}
	slices.Sort(blocks)
	if v.journal == nil {
		if err := v.writeHomeRuns(blocks); err != nil {
			return err
		}
		clear(v.meta)
		if v.bulk {
			return nil // made durable by Close (bulk.go)
		}
		return v.syncDevice()
	}
	// needs_recovery goes home, durably, before the journal points at the
	// transaction, and is cleared only after the checkpoint emptied the
	// log: it is set whenever a committed transaction may not be home.
	// e2fsck -fn of an open but idle volume stays clean.
	// The staged superblock carries the flag too, so the checkpoint's
	// home writes keep it set until the log is marked empty.
	// The flag goes home on the superblock as last committed, not the
	// staged one: that (new counts; after Shrink, a new geometry) reaches
	// home only through the journal, so a crash before the commit leaves
	// the volume as the last commit left it.
	onDisk := make([]byte, disk.SuperblockSize)
	if n, err := v.dev.ReadAt(onDisk, disk.SuperblockOffset); n != len(onDisk) {
		return fmt.Errorf("reading the superblock: %w", err)
	}
	committed, err := disk.DecodeSuperblock(onDisk)
	if err != nil {
		return err
	}
	committed.FeatureIncompat |= disk.IncompatRecover
	if err := v.writeAt(committed.Encode(), disk.SuperblockOffset); err != nil {
		return err
	}
	flagged := *v.sb
	flagged.FeatureIncompat |= disk.IncompatRecover
	if err := v.metaWriteAt(flagged.Encode(), disk.SuperblockOffset); err != nil {
		return err
	}
	// Durable before the journal superblock points at the transaction, so
	// a non-empty log always comes with the flag (e2fsck insists).
	if err := v.syncDevice(); err != nil {
		return err
	}
	tx, err := v.journal.Begin()
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if err := tx.Log(b, v.meta[b]); err != nil {
			tx.Discard()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		tx.Discard()
		if errors.Is(err, jbd2.ErrNoSpace) {
			return fmt.Errorf("%w: one flush changes %d metadata blocks, more than the %d-block journal holds", ErrNoSpace, len(blocks), v.journal.Len())
		}
		return err
	}
	if v.crashAfterCommit {
		return errCrashAfterCommit
	}
	if err := v.journal.Checkpoint(home{v}); err != nil {
		return err
	}
	clear(v.meta)
	// The log is empty and flushed: clear the flag. Unsynced on purpose:
	// if a crash loses this write, recovery of an empty log is a no-op.
	return v.writeAt(v.superBytes(), disk.SuperblockOffset)
}

// journalBudget is how many staged and pending metadata blocks a batch
// may reach before ext4lite flushes on its own, keeping each transaction
// well inside the journal.
func (v *FS) journalBudget() int {
	if v.bulk {
		return bulkBudget
	}
	if v.journal == nil {
		return 1 << 16
	}
	return int(v.journal.Len()) / 4
}

// maybeFlush flushes when the changes since the last flush might no longer
// fit one transaction. It is cheap: every 256 calls it estimates the
// blocks a flush would stage from the operations since the last one (each
// dirties a few inodes).
func (v *FS) maybeFlush() error {
	v.opsSinceFlush++
	if v.opsSinceFlush%256 != 0 {
		return nil
	}
	perBlock := max(1, v.bs/v.inodeSize)
	// Directories are written whole at a flush, but their size is left
	// out: counting it made every batch in a directory larger than the
	// budget flush (and rewrite it) every 256 operations — quadratic.
	// A flush writes each dirty directory once, whatever the batch size;
	// each directory made since the last flush is one block more (a
	// 3,000-deep chain of new directories overflowed the journal).
	est := len(v.meta) + 3*v.opsSinceFlush/perBlock + v.opsSinceFlush/8 + 2*len(v.groups)/8 + 8 + v.dirsSinceFlush
	if est < v.journalBudget() {
		return nil
	}
	return v.flushMetadata()
}

// errCrashAfterCommit is returned when a test stops ext4lite right after a
// commit, leaving the transaction in the log as a crash would.
var errCrashAfterCommit = errors.New("ext4lite: stopped after commit (test hook)")

// journalErr wraps a jbd2 error so it also matches ext4lite's sentinels:
// a damaged journal is a corrupt volume.
func journalErr(what string, err error) error {
	switch {
	case errors.Is(err, jbd2.ErrCorrupt):
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	case errors.Is(err, jbd2.ErrUnsupported):
		return fmt.Errorf("%w: %s: %w", ErrUnsupported, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
