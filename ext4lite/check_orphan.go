package ext4lite

// This file holds Check's passes over the two places orphans are kept:
// the s_last_orphan chain and the orphan file (orphan_file, e2fsprogs
// ≥ 1.47's default).

import (
	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

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
		if !c.readInode(ino, slot, "orphan inode") {
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

// readInode reads inode ino's slot (ino in 1..s_inodes_count) into slot
// (c.isz bytes). A descriptor whose inode table is outside the volume is
// already a finding; false then.
func (c *checker) readInode(ino uint32, slot []byte, what string) bool {
	g, i := (ino-1)/c.ipg, (ino-1)%c.ipg
	t := c.gds[g].InodeTable()
	if t < c.fdb || t+c.itb > c.blocks {
		return false
	}
	return c.read(slot, int64(t)*int64(c.bs)+int64(i)*int64(c.isz), ino, what)
}

// isOrphanFile reports whether ino is the orphan file's inode.
func (c *checker) isOrphanFile(ino uint32) bool { return c.orphanFile && ino == c.sb.OrphanFileInum }

// orphanFileSuper checks what the superblock says about the orphan file
// (called from the superblock pass): an inode number e2fsck and the
// kernel can use, a journal beside it (e2fsck: "orphan file without a
// journal"), orphan_present only with orphan_file. An unusable inode
// number turns the rest of the orphan file's checks off.
func (c *checker) orphanFileSuper() {
	sb := c.sb
	c.orphanFile = sb.FeatureCompat&disk.CompatOrphanFile != 0
	c.orphanPresent = sb.FeatureROCompat&disk.ROCompatOrphanPresent != 0
	if c.orphanPresent && !c.orphanFile {
		c.add(0, 0, "superblock: orphan_present is set without orphan_file")
	}
	if !c.orphanFile {
		return
	}
	if ino := sb.OrphanFileInum; ino < sb.FirstIno || ino > sb.InodesCount {
		c.add(ino, 0, "superblock: orphan file inode %d, outside %d..%d", ino, sb.FirstIno, sb.InodesCount)
		c.orphanFile = false
		return
	}
	if !c.hasJournal {
		c.add(sb.OrphanFileInum, 0, "orphan_file is set on a volume without a journal")
	}
}

// orphanFileInode checks the orphan file's inode before the inode scan
// (which then skips it), so that its blocks are known when the orphan
// file pass reads the entries, and the scan knows which inodes without
// links are orphans. It must be a regular file in use; its blocks are
// claimed like any file's.
func (c *checker) orphanFileInode() {
	if !c.orphanFile {
		return
	}
	ino := c.sb.OrphanFileInum
	slot := make([]byte, c.isz)
	if !c.readInode(ino, slot, "orphan file inode") {
		c.orphanFile = false
		return
	}
	in := disk.DecodeInode(slot)
	if in.Mode&disk.ModeTypeMask != disk.ModeReg || in.LinksCount == 0 {
		c.add(ino, 0, "orphan file inode is not a regular file in use (mode %#o, %d links)", in.Mode, in.LinksCount)
		c.orphanFile = false
		return
	}
	c.inode(ino, slot)
}

// orphanFileEntries reads the orphan file: i_size a whole number of
// blocks, each mapped (no hole), each with the tail's magic and
// (metadata_csum) checksum, as the kernel demands to mount it. Nonzero
// entries are orphans like the chain's: inodes in range, in use, listed
// once; they are in use for the rest of the check. At rest they are
// reported (unless AllowOrphans), and orphan_present must be set while
// there are any.
func (c *checker) orphanFileEntries() {
	if !c.orphanFile {
		return
	}
	ino := c.sb.OrphanFileInum
	ci := c.inodes[ino]
	if ci == nil || !ci.extOK {
		return // the inode or its tree is damaged: already a finding
	}
	bs := uint64(c.bs)
	if ci.size%bs != 0 {
		// e2fsck: "orphan file (inode N) size is not multiple of block size".
		c.add(ino, 0, "orphan file size %d is not a multiple of the block size", ci.size)
		return
	}
	n := ci.size / bs
	seed := disk.InodeSeed(c.seed, ino, ci.gen)
	b := make([]byte, c.bs)
	slot := make([]byte, c.isz)
	found, next := 0, uint64(0)
	for _, e := range ci.ext {
		if next >= n || c.stop {
			break
		}
		if uint64(e.Block) != next {
			break
		}
		// An unwritten extent is read as it is on disk, as the kernel's
		// ext4_bread and e2fsck read it.
		for i := uint64(0); i < uint64(e.Len) && next < n && !c.stop; i, next = i+1, next+1 {
			blk := e.Start + i
			if !c.readBlock(blk, b, ino, "orphan file block") {
				continue
			}
			ob, err := disk.DecodeOrphanBlock(b)
			if err != nil {
				c.add(ino, blk, "orphan file block %d: %v", next, err)
				continue
			}
			if p := ob.Valid(c.csum, seed, blk); p != "" {
				c.add(ino, blk, "orphan file block %d: %s", next, p)
				continue // its entries cannot be trusted
			}
			for j := 0; j < ob.Len() && !c.stop; j++ {
				if o := ob.Entry(j); o != 0 && c.orphanEntry(o, next, j, slot) {
					found++
				}
			}
		}
	}
	if next < n && !c.stop {
		// e2fsck: "orphan file (inode N) has a hole at block B".
		c.add(ino, 0, "the orphan file has a hole at block %d of %d", next, n)
	}
	switch {
	case found > 0 && !c.orphanPresent:
		c.add(ino, 0, "%d inode(s) in the orphan file, but orphan_present is clear", found)
	case found > 0 && !c.allowOrphans:
		c.add(ino, 0, "%d inode(s) in the orphan file (unlinked while open; the next read-write open frees them)", found)
	case found == 0 && c.orphanPresent && !c.allowOrphans:
		// e2fsck: "Feature orphan_present is set but orphan file is clean."
		c.add(ino, 0, "orphan_present is set but the orphan file is empty")
	}
}

// orphanEntry checks entry j of orphan file block blk, inode o; true
// when it is an orphan the rest of the check counts in use.
func (c *checker) orphanEntry(o uint32, blk uint64, j int, slot []byte) bool {
	switch {
	case o < c.sb.FirstIno || o > c.sb.InodesCount || o == c.sb.OrphanFileInum:
		c.add(o, 0, "orphan file block %d entry %d is inode %d, outside %d..%d (or the orphan file itself)", blk, j, o, c.sb.FirstIno, c.sb.InodesCount)
		return false
	case c.orphans[o]:
		c.add(o, 0, "orphan file block %d entry %d: the inode is already an orphan (listed twice)", blk, j)
		return false
	}
	if !c.readInode(o, slot, "orphan inode") {
		return false
	}
	if disk.DecodeInode(slot).Mode == 0 {
		c.add(o, 0, "orphan file block %d entry %d is a free inode", blk, j)
		return false
	}
	c.orphans[o] = true
	return true
}
