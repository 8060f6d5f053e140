package jbd2

import (
	"errors"
	"fmt"
	"time"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// Journal is an open journal. It is not safe for concurrent use.
type Journal struct {
	dev   BlockDevice
	bs    int
	sb    disk.Superblock
	sbBuf []byte

	feat     disk.IncompatFeature
	csum     bool   // checksum v2 or v3
	seed     uint32 // j_csum_seed
	tagBytes int

	dirtyAtOpen bool // s_start != 0 when opened and not yet recovered
	failed      error

	// The log: committed transactions occupy [tail, head) circularly.
	head    uint32 // next block to write
	used    uint32 // blocks in use in the log
	nextSeq uint32 // ID of the next transaction

	// Committed transactions not yet checkpointed, oldest first.
	pending []*committedTx

	now      func() time.Time
	buf      []byte // scratch: one metadata block, one escaped data block
	run      []byte // consecutive log blocks gathered for a RunWriter
	runStart uint32
	spare    [][]byte // block buffers for reuse by Tx.Log
}

// committedTx remembers where each block of a committed transaction went in
// the log, so Checkpoint can read it back.
type committedTx struct {
	seq     uint32
	blocks  []loggedAt
	revoked []uint64
}

type loggedAt struct {
	fsBlock uint64
	jblock  uint32
	escaped bool
}

// Open reads and validates the journal superblock in block 0 of dev.
// A journal holding committed transactions opens fine (see NeedsRecovery);
// transactions are refused until Recover has replayed it.
func Open(dev BlockDevice, blockSize int) (*Journal, error) {
	if err := checkBlockSize(blockSize); err != nil {
		return nil, err
	}
	j := &Journal{dev: dev, bs: blockSize, sbBuf: make([]byte, blockSize), now: time.Now}
	if err := dev.ReadBlock(0, j.sbBuf); err != nil {
		return nil, fmt.Errorf("jbd2: reading superblock: %w", err)
	}
	if err := parseSuperblock(j.sbBuf, blockSize, &j.sb); err != nil {
		return nil, err
	}
	if s, ok := dev.(Sizer); ok && j.sb.MaxLen > s.NumBlocks() {
		return nil, corruptf(0, "journal of %d blocks on a device of %d", j.sb.MaxLen, s.NumBlocks())
	}
	j.setFeatureState()
	j.dirtyAtOpen = j.sb.Start != 0
	j.resetLog()
	return j, nil
}

// parseSuperblock decodes and validates a journal superblock.
func parseSuperblock(p []byte, blockSize int, sb *disk.Superblock) error {
	if len(p) < disk.SuperblockSize {
		return corruptf(0, "superblock shorter than %d bytes", disk.SuperblockSize)
	}
	sb.Unmarshal(p)
	if sb.Magic != disk.Magic {
		return corruptf(0, "bad magic %#x", sb.Magic)
	}
	switch sb.BlockType {
	case disk.BlockSuperblockV1:
		// v1 superblocks have no feature fields.
		sb.FeatureCompat, sb.FeatureIncompat, sb.FeatureRoCompat = 0, 0, 0
	case disk.BlockSuperblockV2:
	default:
		return corruptf(0, "block type %d is not a superblock", sb.BlockType)
	}
	if int(sb.BlockSize) != blockSize {
		return corruptf(0, "block size %d, device has %d", sb.BlockSize, blockSize)
	}
	if sb.MaxLen < MinBlocks {
		return corruptf(0, "journal of %d blocks is shorter than %d", sb.MaxLen, MinBlocks)
	}
	if sb.First == 0 || sb.First >= sb.MaxLen || sb.MaxLen-sb.First < 2 {
		return corruptf(0, "first log block %d outside journal of %d blocks", sb.First, sb.MaxLen)
	}
	if sb.Start != 0 && (sb.Start < sb.First || sb.Start >= sb.MaxLen) {
		return corruptf(0, "log start %d outside [%d, %d)", sb.Start, sb.First, sb.MaxLen)
	}
	if sb.NrUsers > disk.MaxUsers {
		return corruptf(0, "%d users, at most %d", sb.NrUsers, disk.MaxUsers)
	}
	f := Features{Compat: sb.FeatureCompat, Incompat: sb.FeatureIncompat, RoCompat: sb.FeatureRoCompat}
	if err := f.check(); err != nil {
		return err
	}
	if sb.HasCsumV2or3() {
		if sb.FeatureCompat&disk.CompatChecksum != 0 {
			return corruptf(0, "both checksum v1 and v2/v3 set")
		}
		if sb.ChecksumType != disk.ChecksumCRC32C {
			return unsupportedf("checksum type %d", sb.ChecksumType)
		}
		if got := disk.SuperblockChecksum(p); got != sb.Checksum {
			return corruptf(0, "superblock checksum %#x, computed %#x", sb.Checksum, got)
		}
	}
	return nil
}

func (j *Journal) setFeatureState() {
	j.feat = j.sb.FeatureIncompat
	j.csum = j.sb.HasCsumV2or3()
	j.seed = disk.CsumSeed(j.sb.UUID)
	j.tagBytes = disk.TagBytes(j.feat)
}

// resetLog empties the in-memory log. The next ID is s_sequence+1, as Linux
// does for a clean journal, so no block a previous writer left in the log
// can pass for a new one. The head stays where it is (the log is circular),
// or restarts at s_first when the journal was just opened.
func (j *Journal) resetLog() {
	if j.head < j.sb.First || j.head >= j.sb.MaxLen {
		j.head = j.sb.First
	}
	j.used = 0
	j.nextSeq = j.sb.Sequence + 1
	j.pending = j.pending[:0]
}

// BlockSize returns the journal's block size.
func (j *Journal) BlockSize() int { return j.bs }

// Len returns the number of blocks in the journal (s_maxlen).
func (j *Journal) Len() uint32 { return j.sb.MaxLen }

// Features returns the journal's feature set.
func (j *Journal) Features() Features {
	return Features{Compat: j.sb.FeatureCompat, Incompat: j.sb.FeatureIncompat, RoCompat: j.sb.FeatureRoCompat}
}

// UUID returns s_uuid.
func (j *Journal) UUID() [16]byte { return j.sb.UUID }

// Sequence returns the ID the next committed transaction will get.
func (j *Journal) Sequence() uint32 { return j.nextSeq }

// NeedsRecovery reports whether the journal held committed transactions when
// it was opened (s_start != 0) that Recover has not yet replayed.
func (j *Journal) NeedsRecovery() bool { return j.dirtyAtOpen }

// Free returns the number of log blocks free for new transactions.
func (j *Journal) Free() uint32 { return j.logLen() - j.used }

func (j *Journal) logLen() uint32 { return j.sb.MaxLen - j.sb.First }

// SetClock sets the clock that stamps commit blocks (default time.Now);
// fix it for deterministic journals.
func (j *Journal) SetClock(now func() time.Time) { j.now = now }

// SetFeatures adds features to the journal and rewrites its superblock, as
// Linux does when it mounts a filesystem (see KernelFeatures). The log must
// be empty. Features already set stay set.
func (j *Journal) SetFeatures(f Features) error {
	if err := j.usable(); err != nil {
		return err
	}
	if j.used != 0 {
		return errors.New("jbd2: SetFeatures needs an empty log; checkpoint first")
	}
	nf := Features{Compat: j.sb.FeatureCompat | f.Compat, Incompat: j.sb.FeatureIncompat | f.Incompat, RoCompat: j.sb.FeatureRoCompat | f.RoCompat}
	if nf.Incompat&(IncompatCsumV2|IncompatCsumV3) != 0 {
		nf.Compat &^= CompatChecksum // v1 checksums give way to v2/v3, as in the kernel
	}
	if err := nf.check(); err != nil {
		return err
	}
	if nf == j.Features() {
		return nil
	}
	j.sb.BlockType = disk.BlockSuperblockV2
	j.sb.FeatureCompat, j.sb.FeatureIncompat, j.sb.FeatureRoCompat = nf.Compat, nf.Incompat, nf.RoCompat
	if j.sb.HasCsumV2or3() {
		j.sb.ChecksumType = disk.ChecksumCRC32C
	}
	j.setFeatureState()
	return j.writeSuperblock(true)
}

// writeSuperblock writes j.sb to block 0, then flushes if asked.
func (j *Journal) writeSuperblock(doFlush bool) error {
	encodeSuperblock(&j.sb, j.sbBuf)
	if err := j.dev.WriteBlock(0, j.sbBuf); err != nil {
		return j.fail(fmt.Errorf("jbd2: writing superblock: %w", err))
	}
	if doFlush {
		if err := flush(j.dev); err != nil {
			return j.fail(fmt.Errorf("jbd2: flushing journal: %w", err))
		}
	}
	return nil
}

// fail records a device error: after a failed write the journal's state on
// disk is unknown, so every later operation fails until it is reopened (and
// recovered).
func (j *Journal) fail(err error) error {
	if j.failed == nil {
		j.failed = err
	}
	return err
}

func (j *Journal) usable() error {
	if j.failed != nil {
		return fmt.Errorf("jbd2: journal failed earlier, reopen and recover: %w", j.failed)
	}
	if j.dirtyAtOpen {
		return ErrNeedsRecovery
	}
	return nil
}

// wrap returns the log block after b.
func (j *Journal) next(b uint32) uint32 {
	b++
	if b >= j.sb.MaxLen {
		b = j.sb.First
	}
	return b
}
