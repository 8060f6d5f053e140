package ext4lite

// This file holds Check's pass over link counts against the entries found,
// and lost+found.

import (
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// links checks reachability, ".." entries, link counts and lost+found.
func (c *checker) links() {
	root := c.inodes[disk.RootIno]
	if root == nil {
		return
	}
	// Breadth-first from the root; each directory is entered once.
	queue := []uint32{disk.RootIno}
	root.reached = true
	for len(queue) > 0 {
		ino := queue[0]
		queue = queue[1:]
		for _, t := range c.children[ino] {
			ci := c.inodes[t]
			if ci == nil || ci.reached {
				continue
			}
			ci.reached = true
			if ci.mode&disk.ModeTypeMask == disk.ModeDir {
				queue = append(queue, t)
			}
		}
	}
	inos := make([]uint32, 0, len(c.inodes))
	for ino := range c.inodes {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		ci := c.inodes[ino]
		if ino < c.sb.FirstIno && ino != disk.RootIno {
			continue
		}
		isDir := ci.mode&disk.ModeTypeMask == disk.ModeDir
		if c.isOrphanFile(ino) {
			// Linked from no directory; the kernel refuses to look it up.
			if c.counted[ino] != 0 {
				c.add(ino, 0, "the orphan file is named by %d directory entries", c.counted[ino])
			}
			continue
		}
		if c.orphans[ino] && ci.links == 0 {
			if c.counted[ino] != 0 {
				c.add(ino, 0, "orphan with no links is named by %d directory entries", c.counted[ino])
			}
			continue
		}
		if !ci.reached {
			c.add(ino, 0, "in use (%d links) but not reachable from the root", ci.links)
		}
		if isDir && ci.extOK {
			want := c.named[ino]
			if ino == disk.RootIno {
				want = disk.RootIno
			}
			if ci.parent != want && want != 0 {
				c.add(ino, 0, "'..' is %d, but the directory is named in %d", ci.parent, want)
			}
		}
		counted := c.counted[ino]
		// dir_nlink: a directory past EXT4_LINK_MAX links counts 1. The
		// kernel sets 1 on an indexed directory as it reaches the limit
		// and never raises it again; e2fsck accepts 1 on any indexed
		// directory.
		if isDir && ci.links == 1 && counted > 1 && (counted > disk.MaxLinks || ci.flags&disk.FlagIndex != 0) {
			counted = 1
		}
		if uint32(ci.links) != counted && (!isDir || ci.extOK) {
			c.add(ino, 0, "link count %d, counted %d", ci.links, counted)
		}
	}
	lf := uint32(0)
	if root.extOK {
		lf = c.lostFound()
	}
	if lf == 0 {
		c.add(disk.RootIno, 0, "/lost+found not found")
	}
}

// lostFound finds /lost+found by reading the root again (entry names are
// not kept).
func (c *checker) lostFound() uint32 {
	root := c.inodes[disk.RootIno]
	found := uint32(0)
	b := make([]byte, c.bs)
	for _, e := range root.ext {
		for i := uint32(0); i < uint32(e.Len) && found == 0 && !c.stop; i++ {
			if e.Uninit || !c.readBlock(e.Start+uint64(i), b, disk.RootIno, "root directory block") {
				break
			}
			end := c.bs
			for p := 0; p+disk.DirentHeaderSize <= end; {
				de := disk.DecodeDirent(b[p:])
				rl := disk.DecodeRecLen(de.RecLen, c.bs)
				if rl < disk.DirentHeaderSize || p+rl > end || disk.DirentHeaderSize+int(de.NameLen) > rl {
					break
				}
				if de.Inode != 0 && string(b[p+8:p+8+int(de.NameLen)]) == "lost+found" {
					if t := c.inodes[de.Inode]; t != nil && t.mode&disk.ModeTypeMask == disk.ModeDir {
						found = de.Inode
					}
					break
				}
				p += rl
			}
		}
	}
	return found
}
