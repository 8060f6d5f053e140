package jbd2

import (
	"errors"
	"fmt"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// Tx is a transaction: a set of whole filesystem blocks that reach the
// journal (and then their homes) all together or not at all.
type Tx struct {
	j       *Journal
	index   map[uint64]int // fsBlock → position in blocks
	blocks  []txBlock
	revoked []uint64
	revIdx  map[uint64]int // fsBlock → position in revoked
	done    bool
}

type txBlock struct {
	fsBlock uint64
	data    []byte // nil once cancelled by a later Revoke
}

// Begin starts a transaction. Only one transaction is open at a time in
// practice, but the Journal does not enforce it: transactions commit in the
// order Commit is called.
func (j *Journal) Begin() (*Tx, error) {
	if err := j.usable(); err != nil {
		return nil, err
	}
	return &Tx{j: j, index: make(map[uint64]int), revIdx: make(map[uint64]int)}, nil
}

var errTxDone = errors.New("jbd2: transaction already committed or discarded")

func (tx *Tx) checkBlock(fsBlock uint64) error {
	if tx.done {
		return errTxDone
	}
	if tx.j.feat&disk.Incompat64Bit == 0 && fsBlock>>32 != 0 {
		return fmt.Errorf("jbd2: block %d needs the 64bit journal feature", fsBlock)
	}
	return nil
}

// Log adds the new content of filesystem block fsBlock (one block) to the
// transaction. The data is copied. Logging a block again replaces its
// content; logging a block revoked earlier in the transaction cancels the
// revoke.
func (tx *Tx) Log(fsBlock uint64, data []byte) error {
	if err := tx.checkBlock(fsBlock); err != nil {
		return err
	}
	if len(data) != tx.j.bs {
		return fmt.Errorf("jbd2: logging %d bytes, block size is %d", len(data), tx.j.bs)
	}
	if i, ok := tx.revIdx[fsBlock]; ok {
		tx.dropRevoke(i)
	}
	if i, ok := tx.index[fsBlock]; ok {
		copy(tx.blocks[i].data, data)
		return nil
	}
	buf := tx.j.getBuf()
	copy(buf, data)
	tx.index[fsBlock] = len(tx.blocks)
	tx.blocks = append(tx.blocks, txBlock{fsBlock: fsBlock, data: buf})
	return nil
}

// Revoke records that fsBlock no longer holds journaled metadata (it was
// freed): replay must not write any earlier logged copy of it over what the
// filesystem writes there later. Revoking a block logged earlier in the
// transaction drops that log entry.
func (tx *Tx) Revoke(fsBlock uint64) error {
	if err := tx.checkBlock(fsBlock); err != nil {
		return err
	}
	if i, ok := tx.index[fsBlock]; ok {
		tx.j.putBuf(tx.blocks[i].data)
		tx.blocks[i].data = nil
		delete(tx.index, fsBlock)
	}
	if _, ok := tx.revIdx[fsBlock]; !ok {
		tx.revIdx[fsBlock] = len(tx.revoked)
		tx.revoked = append(tx.revoked, fsBlock)
	}
	return nil
}

func (tx *Tx) dropRevoke(i int) {
	b := tx.revoked[i]
	last := len(tx.revoked) - 1
	tx.revoked[i] = tx.revoked[last]
	tx.revIdx[tx.revoked[i]] = i
	tx.revoked = tx.revoked[:last]
	delete(tx.revIdx, b)
}

// Discard drops the transaction without writing anything.
func (tx *Tx) Discard() {
	if tx.done {
		return
	}
	tx.done = true
	for _, b := range tx.blocks {
		tx.j.putBuf(b.data)
	}
	tx.blocks = nil
}

// layout counts the journal blocks the transaction takes.
func (tx *Tx) layout() (revokeBlocks, descriptors, data int) {
	j := tx.j
	for _, b := range tx.blocks {
		if b.data != nil {
			data++
		}
	}
	if n := len(tx.revoked); n > 0 {
		per := j.revokePerBlock()
		revokeBlocks = (n + per - 1) / per
	}
	if data > 0 {
		per := j.tagsPerDescriptor()
		descriptors = (data + per - 1) / per
	}
	return
}

// Blocks returns the number of journal blocks Commit will write.
func (tx *Tx) Blocks() int {
	r, d, n := tx.layout()
	if r+d+n == 0 {
		return 0
	}
	return r + d + n + 1
}

func (j *Journal) tailSize() int {
	if j.csum {
		return disk.TailSize
	}
	return 0
}

func (j *Journal) revokePerBlock() int {
	return (j.bs - disk.RevokeHdrSize - j.tailSize()) / disk.RevokeRecordSize(j.feat)
}

// tagsPerDescriptor: the first tag carries the 16-byte UUID.
func (j *Journal) tagsPerDescriptor() int {
	avail := j.bs - disk.HeaderSize - j.tailSize()
	return (avail-disk.UUIDSize-j.tagBytes)/j.tagBytes + 1
}

// Commit writes the transaction to the log: revoke, descriptor and data
// blocks, a flush, the commit block, a flush. When Commit returns nil the
// transaction survives a crash; if it fails the journal refuses further
// work, and after a crash the transaction is either wholly there or absent.
//
// If the log lacks room, Commit returns an error wrapping ErrNoSpace and the
// transaction stays open: Checkpoint, then Commit again.
func (tx *Tx) Commit() error {
	if tx.done {
		return errTxDone
	}
	j := tx.j
	if err := j.usable(); err != nil {
		return err
	}
	need := tx.Blocks()
	if need == 0 {
		tx.Discard()
		return nil
	}
	if uint32(need) > j.Free() || need > int(j.logLen()) {
		return fmt.Errorf("%w: transaction needs %d blocks, log has %d free of %d", ErrNoSpace, need, j.Free(), j.logLen())
	}
	seq := j.nextSeq
	ct := &committedTx{seq: seq, revoked: append([]uint64(nil), tx.revoked...)}
	start := j.head
	j.ensureScratch()

	if len(tx.revoked) > 0 {
		if err := j.writeRevokes(seq, tx.revoked); err != nil {
			return err
		}
	}
	if err := j.writeData(seq, tx.blocks, ct); err != nil {
		return err
	}
	if err := j.flushRun(); err != nil {
		return err
	}
	// The superblock must point at this transaction before its commit block
	// can count: write it in the same batch when the log was empty.
	sbDirty := false
	if j.used == 0 {
		j.sb.Start, j.sb.Sequence = start, seq
		sbDirty = true
	}
	if len(tx.revoked) > 0 && j.sb.FeatureIncompat&disk.IncompatRevoke == 0 {
		j.sb.FeatureIncompat |= disk.IncompatRevoke
		j.setFeatureState()
		sbDirty = true
	}
	if sbDirty {
		if err := j.writeSuperblock(false); err != nil {
			return err
		}
	}
	if err := flush(j.dev); err != nil {
		return j.fail(fmt.Errorf("jbd2: flushing journal: %w", err))
	}
	if err := j.writeCommit(seq); err != nil {
		return err
	}
	if err := j.flushRun(); err != nil {
		return err
	}
	if err := flush(j.dev); err != nil {
		return j.fail(fmt.Errorf("jbd2: flushing journal: %w", err))
	}
	j.used += uint32(need)
	j.nextSeq++
	j.pending = append(j.pending, ct)
	tx.Discard()
	return nil
}

func (j *Journal) ensureScratch() {
	if len(j.buf) != 2*j.bs {
		j.buf = make([]byte, 2*j.bs)
	}
}

// maxRun caps the bytes gathered for one RunWriter call.
const maxRun = 1 << 20

// writeLog writes one block at the head of the log and advances it. With a
// RunWriter device, consecutive blocks are gathered and written together by
// flushRun.
func (j *Journal) writeLog(p []byte) (uint32, error) {
	b := j.head
	if _, ok := j.dev.(RunWriter); ok {
		if len(j.run) > 0 && (b != j.runStart+uint32(len(j.run)/j.bs) || len(j.run)+len(p) > maxRun) {
			if err := j.flushRun(); err != nil {
				return 0, err
			}
		}
		if len(j.run) == 0 {
			j.runStart = b
		}
		j.run = append(j.run, p...)
	} else if err := j.dev.WriteBlock(b, p); err != nil {
		return 0, j.fail(fmt.Errorf("jbd2: writing journal block %d: %w", b, err))
	}
	j.head = j.next(b)
	return b, nil
}

// flushRun writes the gathered blocks (not a device flush).
func (j *Journal) flushRun() error {
	if len(j.run) == 0 {
		return nil
	}
	err := j.dev.(RunWriter).WriteBlocks(j.runStart, j.run)
	n := len(j.run) / j.bs
	j.run = j.run[:0]
	if err != nil {
		return j.fail(fmt.Errorf("jbd2: writing journal blocks %d-%d: %w", j.runStart, j.runStart+uint32(n)-1, err))
	}
	return nil
}

func (j *Journal) writeRevokes(seq uint32, revoked []uint64) error {
	blk := j.buf[:j.bs]
	recsz := disk.RevokeRecordSize(j.feat)
	per := j.revokePerBlock()
	for len(revoked) > 0 {
		n := min(per, len(revoked))
		clear(blk)
		off := disk.RevokeHdrSize
		for _, b := range revoked[:n] {
			disk.PutRevokeRecord(blk[off:], j.feat, b)
			off += recsz
		}
		h := disk.RevokeHeader{Header: disk.Header{Magic: disk.Magic, BlockType: disk.BlockRevoke, Sequence: seq}, Count: uint32(off)}
		h.Marshal(blk)
		if j.csum {
			disk.SetTailChecksum(j.seed, blk)
		}
		if _, err := j.writeLog(blk); err != nil {
			return err
		}
		revoked = revoked[n:]
	}
	return nil
}

// escaped returns the block as the journal stores it: a block starting with
// the journal magic is stored with those four bytes zeroed.
func (j *Journal) escaped(data []byte) ([]byte, bool) {
	if be32(data) != disk.Magic {
		return data, false
	}
	e := j.buf[j.bs:]
	copy(e, data)
	clear(e[:4])
	return e, true
}

func (j *Journal) writeData(seq uint32, blocks []txBlock, ct *committedTx) error {
	desc := j.buf[:j.bs]
	per := j.tagsPerDescriptor()
	i := 0
	for i < len(blocks) {
		// Gather the next batch of live blocks.
		clear(desc)
		(&disk.Header{Magic: disk.Magic, BlockType: disk.BlockDescriptor, Sequence: seq}).Marshal(desc)
		off := disk.HeaderSize
		var batch []int
		for ; i < len(blocks) && len(batch) < per; i++ {
			if blocks[i].data != nil {
				batch = append(batch, i)
			}
		}
		if len(batch) == 0 {
			break
		}
		for k, bi := range batch {
			b := blocks[bi]
			e, esc := j.escaped(b.data)
			t := disk.BlockTag{Block: b.fsBlock}
			if esc {
				t.Flags |= disk.FlagEscape
			}
			if k > 0 {
				t.Flags |= disk.FlagSameUUID
			}
			if k == len(batch)-1 {
				t.Flags |= disk.FlagLastTag
			}
			if j.csum {
				t.Checksum = disk.BlockTagChecksum(j.seed, seq, e)
			}
			disk.PutTag(desc[off:], j.feat, t)
			off += j.tagBytes
			if k == 0 {
				copy(desc[off:], j.sb.UUID[:])
				off += disk.UUIDSize
			}
		}
		if j.csum {
			disk.SetTailChecksum(j.seed, desc)
		}
		if _, err := j.writeLog(desc); err != nil {
			return err
		}
		for _, bi := range batch {
			b := blocks[bi]
			e, esc := j.escaped(b.data)
			at, err := j.writeLog(e)
			if err != nil {
				return err
			}
			ct.blocks = append(ct.blocks, loggedAt{fsBlock: b.fsBlock, jblock: at, escaped: esc})
		}
	}
	return nil
}

func (j *Journal) writeCommit(seq uint32) error {
	blk := j.buf[:j.bs]
	clear(blk)
	now := j.now()
	c := disk.Commit{
		Header:     disk.Header{Magic: disk.Magic, BlockType: disk.BlockCommit, Sequence: seq},
		CommitSec:  uint64(now.Unix()),
		CommitNsec: uint32(now.Nanosecond()),
	}
	c.Marshal(blk)
	if j.csum {
		disk.SetCommitChecksum(j.seed, blk)
	}
	_, err := j.writeLog(blk)
	return err
}

func (j *Journal) getBuf() []byte {
	if n := len(j.spare); n > 0 {
		b := j.spare[n-1]
		j.spare = j.spare[:n-1]
		return b
	}
	return make([]byte, j.bs)
}

func (j *Journal) putBuf(b []byte) {
	if b != nil && len(j.spare) < 1024 {
		j.spare = append(j.spare, b)
	}
}
