package jbd2

import (
	"fmt"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// Stats describes what Recover did.
type Stats struct {
	Transactions  int    // committed transactions found and replayed
	Blocks        int    // blocks written home
	Revoked       int    // logged blocks skipped because a later revoke covers them
	RevokeRecords int    // revoke records read
	StartSeq      uint32 // ID of the first transaction in the log
	EndSeq        uint32 // first ID not committed: the log ends there

	// Aborted, when not empty, says why the log was cut at EndSeq though
	// a commit block for it was there: transaction EndSeq failed a
	// checksum (its commit block, a descriptor or revoke block, a logged
	// block), so it and everything after it were discarded and the
	// transactions before it replayed, as e2fsck does for a corrupt commit
	// ("Journal transaction N was corrupt, replay was aborted").
	Aborted string
}

// Recover opens the journal on dev and replays it into home; see
// (*Journal).Recover.
func Recover(dev BlockDevice, blockSize int, home HomeWriter, fsBlocks uint64) (Stats, error) {
	j, err := Open(dev, blockSize)
	if err != nil {
		return Stats{}, err
	}
	return j.Recover(home, fsBlocks)
}

// Recover replays the committed transactions a crash left in the journal,
// as the kernel does in three passes: scan finds the end of the log (the
// first block that is not the next expected one, or a transaction whose
// checksums fail) and verifies every committed transaction — descriptor,
// revoke, logged block and commit checksums, block numbers below fsBlocks;
// revoke collects revoke records; replay writes each logged block home
// unless a revoke in the same or a later transaction covers it. Then it
// flushes home and marks the journal clean (s_start = 0, s_sequence = the
// end ID + 1, as e2fsck does).
//
// A committed transaction that fails a checksum ends the log there: the
// transactions before it are replayed, it and the rest are discarded, and
// Stats.Aborted says which and why (e2fsck does this for a bad commit
// checksum; for a bad descriptor, revoke or logged-block checksum
// e2fsprogs 1.47 replays nothing, or everything but that block, and the
// kernel refuses to mount: keeping the intact prefix is the choice that
// loses nothing committed before the damage). A logged block that a revoke
// in its own or a later transaction covers is never written home, so its
// checksum does not count, as in the kernel and e2fsck, which test the
// revoke first. A transaction whose
// descriptor or revoke checksum fails and whose commit is older than its
// predecessor's is stale (an earlier pass over the log) and ends the log
// silently. A tag naming a block past fsBlocks or a revoke block's r_count
// out of range in a transaction whose checksums hold is corruption: an
// error wrapping ErrCorrupt, and nothing is written home. A journal that
// was clean when opened is left as it is.
func (j *Journal) Recover(home HomeWriter, fsBlocks uint64) (Stats, error) {
	if j.failed != nil {
		return Stats{}, fmt.Errorf("jbd2: journal failed earlier, reopen: %w", j.failed)
	}
	if !j.dirtyAtOpen {
		return Stats{}, nil
	}
	r := &recovery{j: j, home: home, fsBlocks: fsBlocks, buf: make([]byte, j.bs), data: make([]byte, j.bs),
		v1: !j.csum && j.sb.FeatureCompat&disk.CompatChecksum != 0}
	r.st.StartSeq = j.sb.Sequence
	if err := r.pass(passScan); err != nil {
		return r.st, err
	}
	if err := r.collectRevokes(); err != nil {
		return r.st, err
	}
	if r.scanErr != nil {
		return r.st, r.scanErr
	}
	if r.st.Transactions > 0 {
		if err := r.pass(passReplay); err != nil {
			return r.st, err
		}
		if err := flush(home); err != nil {
			return r.st, j.fail(fmt.Errorf("jbd2: flushing home: %w", err))
		}
	}
	j.nextSeq = r.st.EndSeq + 1
	j.sb.Start = 0
	j.sb.Sequence = j.nextSeq
	if err := j.writeSuperblock(true); err != nil {
		return r.st, err
	}
	j.dirtyAtOpen = false
	j.resetLog()
	return r.st, nil
}

type passKind int

const (
	passScan passKind = iota
	passRevoke
	passReplay
)

type recovery struct {
	j        *Journal
	home     HomeWriter
	fsBlocks uint64
	buf      []byte
	data     []byte
	tags     []disk.BlockTag
	revokes  map[uint64]uint32 // fs block → newest revoking transaction
	st       Stats
	csumErr  string // scan: the current transaction's first checksum failure
	badTags  []badTag
	scanErr  error  // scan: a committed transaction at EndSeq is corrupt (see collectRevokes)
	v1       bool   // checksum v1 (COMPAT_CHECKSUM without v2/v3): crc32_be in commit blocks
	v1sum    uint32 // scan: crc32_be of the current transaction's descriptors and logged blocks
}

// badTag is a logged block whose checksum failed in the scan.
type badTag struct {
	seq, at uint32
	block   uint64
}

// collectRevokes runs the revoke pass and settles where the log ends.
//
// A logged block whose checksum fails ends the log at its transaction
// unless a revoke in the same or a later transaction covers it: such a
// block is never written home, so its contents do not matter, and the
// kernel and e2fsck do not read its checksum at all (the revoke test
// comes first in their replay). Ending the log drops the revokes of the
// transactions cut off, which may uncover an earlier bad block, so this
// repeats until the end stays put (it only moves back). A corrupt
// transaction the scan stopped at (r.scanErr) is an error only if the
// log still reaches it.
func (r *recovery) collectRevokes() error {
	for {
		if r.st.Transactions == 0 {
			return nil
		}
		r.revokes = make(map[uint64]uint32)
		r.st.RevokeRecords = 0 // counted again by each pass over the shorter log
		if err := r.pass(passRevoke); err != nil {
			return err
		}
		cut := false
		for _, b := range r.badTags {
			if !tidGT(r.st.EndSeq, b.seq) {
				break // at or past the end: cut off already
			}
			if rs, ok := r.revokes[b.block]; ok && !tidGT(b.seq, rs) {
				continue
			}
			r.st.Aborted = fmt.Sprintf("transaction %d: checksum of logged block %d fails (journal block %d)", b.seq, b.block, b.at)
			r.st.Transactions -= int(r.st.EndSeq - b.seq)
			r.st.EndSeq = b.seq
			r.scanErr = nil
			cut = true
			break
		}
		if !cut {
			return nil
		}
	}
}

// badCsum records the current transaction's first checksum failure.
func (r *recovery) badCsum(seq, at uint32, format string, args ...any) {
	if r.csumErr == "" {
		r.csumErr = fmt.Sprintf("transaction %d: %s (journal block %d)", seq, fmt.Sprintf(format, args...), at)
	}
}

// tidGT is tid_gt: sequence comparison that survives wraparound.
func tidGT(x, y uint32) bool { return int32(x-y) > 0 }

// pass walks the log from s_start. The scan pass stops at the end of the
// log and records it in st.EndSeq; the other passes stop at EndSeq and treat
// anything unexpected before it as corruption (the device changed under us).
func (r *recovery) pass(p passKind) error {
	j := r.j
	blk, seq := j.sb.Start, j.sb.Sequence
	logLen := j.logLen()
	var visited uint32
	var txErr error           // first structural problem in the current, not yet committed, transaction
	var badMeta bool          // a descriptor or revoke block of it failed its checksum
	var lastCommitTime uint64 // h_commit_sec of the previous commit
	r.csumErr, r.v1sum = "", ^uint32(0)

	// end stops the scan; in later passes an early end is corruption.
	end := func(why string) error {
		if p == passScan {
			r.st.EndSeq = seq
			return nil
		}
		return corruptf(blk, "log changed between recovery passes: %s", why)
	}
	for {
		if p != passScan && seq == r.st.EndSeq {
			return nil
		}
		if visited >= logLen {
			return end("log wraps onto itself")
		}
		if err := j.dev.ReadBlock(blk, r.buf); err != nil {
			return fmt.Errorf("jbd2: reading journal block %d: %w", blk, err)
		}
		visited++
		h := disk.ReadHeader(r.buf)
		if h.Magic != disk.Magic || h.Sequence != seq {
			return end("no next block")
		}
		switch h.BlockType {
		case disk.BlockDescriptor:
			if j.csum && !disk.TailChecksumOK(j.seed, r.buf) {
				// A stale block (the log's old contents) or corruption:
				// the commit block will tell, as in the kernel.
				if p != passScan {
					return end("descriptor checksum")
				}
				badMeta = true
				r.badCsum(seq, blk, "descriptor block checksum fails")
			}
			if r.v1 && p == passScan {
				r.v1sum = disk.CRC32BE(r.v1sum, r.buf)
			}
			r.parseTags()
			if uint32(len(r.tags)) > logLen-visited {
				return end("descriptor runs past the log")
			}
			dataBlk := j.next(blk)
			for _, t := range r.tags {
				if err := r.dataBlock(p, seq, dataBlk, t, &txErr); err != nil {
					return err
				}
				dataBlk = j.next(dataBlk)
				visited++
			}
			blk = dataBlk
		case disk.BlockRevoke:
			if err := r.revokeBlock(p, seq, blk, &txErr, &badMeta); err != nil {
				return err
			}
			blk = j.next(blk)
		case disk.BlockCommit:
			commitOK := !j.csum || disk.CommitChecksumOK(j.seed, r.buf)
			if r.v1 && p == passScan {
				// As the kernel: the sum covers descriptor and logged
				// blocks, not revoke blocks; a mismatch ends the log
				// (debugfs's jw counts revoke blocks in: e2fsck and the
				// kernel then stop before such a transaction).
				commitOK = disk.CommitV1OK(r.buf, r.v1sum)
				r.v1sum = ^uint32(0)
			}
			if p != passScan {
				if !commitOK {
					return end("commit checksum")
				}
			} else {
				commitTime := disk.ReadCommitTime(r.buf)
				switch stale := commitTime < lastCommitTime; {
				case stale && (badMeta || !commitOK):
					// Older than its predecessor: a stale transaction
					// from an earlier pass over the log, not ours.
					return end("stale transaction")
				case !commitOK:
					r.st.Aborted = fmt.Sprintf("transaction %d: commit block checksum fails (journal block %d)", seq, blk)
					return end("commit checksum")
				case txErr != nil:
					// Corrupt unless an earlier bad logged block ends
					// the log first (collectRevokes).
					r.scanErr = txErr
					return end("corrupt transaction")
				case r.csumErr != "":
					r.st.Aborted = r.csumErr
					return end("checksum")
				}
				lastCommitTime = commitTime
				r.st.Transactions++
			}
			txErr, badMeta, r.csumErr = nil, false, ""
			seq++
			blk = j.next(blk)
		default:
			return end("unknown block type")
		}
	}
}

// parseTags decodes the descriptor in r.buf into r.tags, as count_tags
// does: tags until LAST_TAG or the end of the block (minus its tail).
func (r *recovery) parseTags() {
	j := r.j
	r.tags = r.tags[:0]
	size := j.bs - j.tailSize()
	for off := disk.HeaderSize; off+j.tagBytes <= size; {
		t := disk.GetTag(r.buf[off:], j.feat)
		off += j.tagBytes
		if t.Flags&disk.FlagSameUUID == 0 {
			off += disk.UUIDSize
		}
		r.tags = append(r.tags, t)
		if t.Flags&disk.FlagLastTag != 0 {
			break
		}
	}
}

func (r *recovery) dataBlock(p passKind, seq, at uint32, t disk.BlockTag, txErr *error) error {
	j := r.j
	switch p {
	case passScan:
		if *txErr != nil || r.csumErr != "" {
			return nil // the transaction is refused or cut already
		}
		if t.Block >= r.fsBlocks {
			*txErr = corruptf(at, "transaction %d logs block %d, filesystem has %d", seq, t.Block, r.fsBlocks)
			return nil
		}
		if !j.csum && !r.v1 {
			return nil
		}
		if err := j.dev.ReadBlock(at, r.data); err != nil {
			return fmt.Errorf("jbd2: reading journal block %d: %w", at, err)
		}
		if r.v1 {
			r.v1sum = disk.CRC32BE(r.v1sum, r.data)
			return nil
		}
		if !r.tagChecksumOK(seq, t) {
			r.badTags = append(r.badTags, badTag{seq, at, t.Block})
		}
	case passReplay:
		if t.Block >= r.fsBlocks { // checked by the scan; keep the promise regardless
			return corruptf(at, "block %d past the filesystem's end", t.Block)
		}
		if rs, ok := r.revokes[t.Block]; ok && !tidGT(seq, rs) {
			r.st.Revoked++
			return nil
		}
		if err := j.dev.ReadBlock(at, r.data); err != nil {
			return fmt.Errorf("jbd2: reading journal block %d: %w", at, err)
		}
		if j.csum && !r.tagChecksumOK(seq, t) {
			return corruptf(at, "log changed between recovery passes: checksum of block %d", t.Block)
		}
		if t.Flags&disk.FlagEscape != 0 {
			putBE32(r.data, magic)
		}
		if err := r.home.WriteHome(t.Block, r.data); err != nil {
			return j.fail(fmt.Errorf("jbd2: replaying block %d: %w", t.Block, err))
		}
		r.st.Blocks++
	}
	return nil
}

func (r *recovery) tagChecksumOK(seq uint32, t disk.BlockTag) bool {
	c := disk.BlockTagChecksum(r.j.seed, seq, r.data)
	if r.j.feat&disk.IncompatCsumV3 == 0 {
		c &= 0xffff
	}
	return c == t.Checksum
}

func (r *recovery) revokeBlock(p passKind, seq, at uint32, txErr *error, badMeta *bool) error {
	j := r.j
	if p == passReplay || (p == passScan && (*txErr != nil || r.csumErr != "")) {
		return nil
	}
	var h disk.RevokeHeader
	h.Unmarshal(r.buf)
	switch {
	case j.csum && !disk.TailChecksumOK(j.seed, r.buf):
		if p != passScan {
			return corruptf(at, "log changed between recovery passes: revoke block checksum")
		}
		*badMeta = true
		r.badCsum(seq, at, "revoke block checksum fails")
		return nil
	case h.Count < disk.RevokeHdrSize || int(h.Count) > j.bs-j.tailSize():
		if p != passScan {
			return corruptf(at, "log changed between recovery passes: revoke r_count")
		}
		*txErr = corruptf(at, "transaction %d: revoke r_count %d out of range", seq, h.Count)
		return nil
	}
	if p == passScan {
		return nil
	}
	recsz := disk.RevokeRecordSize(j.feat)
	for off := disk.RevokeHdrSize; off+recsz <= int(h.Count); off += recsz {
		b := disk.GetRevokeRecord(r.buf[off:], j.feat)
		r.st.RevokeRecords++
		if old, ok := r.revokes[b]; !ok || tidGT(seq, old) {
			r.revokes[b] = seq
		}
	}
	return nil
}
