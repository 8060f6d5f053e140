package ext4lite

// This file holds Check's pass over the journal (through jbd2.Open).

import (
	"fmt"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
)

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
