package jbd2

import (
	"fmt"
	"slices"
)

// Checkpoint writes the latest logged content of every block of the
// committed transactions to its home location (in block order), flushes
// home, then marks the log empty (s_start = 0) and flushes the journal.
// Blocks revoked after their last log are not written. A crash anywhere in
// Checkpoint leaves the log intact, so recovery redoes it.
func (j *Journal) Checkpoint(home HomeWriter) error {
	if err := j.usable(); err != nil {
		return err
	}
	if len(j.pending) == 0 && j.sb.Start == 0 {
		return nil
	}
	final := make(map[uint64]loggedAt)
	for _, ct := range j.pending {
		for _, b := range ct.revoked {
			delete(final, b)
		}
		for _, b := range ct.blocks {
			final[b.fsBlock] = b
		}
	}
	keys := make([]uint64, 0, len(final))
	for b := range final {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	buf := make([]byte, j.bs)
	for _, b := range keys {
		at := final[b]
		if err := j.dev.ReadBlock(at.jblock, buf); err != nil {
			return j.fail(fmt.Errorf("jbd2: reading journal block %d: %w", at.jblock, err))
		}
		if at.escaped {
			putBE32(buf, magic)
		}
		if err := home.WriteHome(b, buf); err != nil {
			return j.fail(fmt.Errorf("jbd2: checkpointing block %d: %w", b, err))
		}
	}
	if err := flush(home); err != nil {
		return j.fail(fmt.Errorf("jbd2: flushing home: %w", err))
	}
	return j.markEmpty()
}

// markEmpty records an empty log in the superblock, as jbd2_mark_journal_empty
// does: s_start = 0, s_sequence = the next transaction ID, s_head = the head.
func (j *Journal) markEmpty() error {
	j.sb.Start = 0
	j.sb.Sequence = j.nextSeq
	j.sb.Head = j.head
	if err := j.writeSuperblock(true); err != nil {
		return err
	}
	j.resetLog()
	return nil
}
