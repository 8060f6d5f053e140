package ext4lite

// This file holds Check's pass over in-inode and block xattrs and their
// reference counts.

import (
	"encoding/binary"
	"sort"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// inodeXattrs checks the in-inode attribute area and the external block;
// it returns 1 when the inode owns (a reference to) an external block.
func (c *checker) inodeXattrs(ino uint32, in *disk.Inode, slot []byte) uint64 {
	if c.isz > disk.GoodOldInodeSize {
		start := disk.GoodOldInodeSize + int(in.ExtraIsize)
		if int(in.ExtraIsize) <= c.isz-disk.GoodOldInodeSize && start+disk.XattrIbodyHeaderLen <= c.isz &&
			binary.LittleEndian.Uint32(slot[start:]) == disk.XattrMagic {
			area := slot[start+disk.XattrIbodyHeaderLen:]
			c.xattrEntries(ino, 0, area, area, 0, true)
		}
	}
	blk := in.FileACL()
	if blk == 0 {
		return 0
	}
	if x := c.xattrs[blk]; x != nil {
		x.users++
		return 1
	}
	x := &cXattrBlock{users: 1}
	c.xattrs[blk] = x
	if !c.claim(blk, 1, ino, "xattr block") {
		return 1
	}
	b := make([]byte, c.bs)
	if !c.readBlock(blk, b, ino, "xattr block") {
		return 1
	}
	if m := binary.LittleEndian.Uint32(b); m != disk.XattrMagic {
		c.add(ino, blk, "xattr block: bad magic %#x", m)
		return 1
	}
	x.refcount = binary.LittleEndian.Uint32(b[4:])
	x.ok = true
	if n := binary.LittleEndian.Uint32(b[8:]); n != 1 {
		c.add(ino, blk, "xattr block: h_blocks %d, want 1", n)
	}
	if c.csum {
		if got, want := binary.LittleEndian.Uint32(b[16:]), disk.XattrBlockChecksum(c.seed, blk, b); got != want {
			c.add(ino, blk, "xattr block: checksum %#x, computed %#x", got, want)
		}
	}
	hashes := c.xattrEntries(ino, blk, b[disk.XattrBlockHeaderLen:], b, disk.XattrBlockHeaderLen, false)
	if hashes != nil {
		// libext2fs (mkfs.ext4 -d) leaves h_hash zero; the kernel fills it.
		if got, want := binary.LittleEndian.Uint32(b[12:]), disk.XattrBlockHash(hashes); got != want && got != 0 {
			c.add(ino, blk, "xattr block: header hash %#x, computed %#x", got, want)
		}
	}
	return 1
}

// xattrEntries checks the entries in ents (values relative to base, ents
// starting at entOff in base). In-inode entries may carry a zero hash. It
// returns the entry hashes, nil when the area is damaged.
func (c *checker) xattrEntries(ino uint32, blk uint64, ents, base []byte, entOff int, inInode bool) []uint32 {
	what := "xattr block"
	if inInode {
		what = "in-inode xattrs"
	}
	type region struct{ lo, hi int }
	var regions []region
	hashes := []uint32{}
	p := 0
	for n := 0; ; n++ {
		if p+4 > len(ents) {
			c.add(ino, blk, "%s: entries run past their area", what)
			return nil
		}
		if binary.LittleEndian.Uint32(ents[p:]) == 0 {
			break
		}
		if p+disk.XattrEntryLen > len(ents) {
			c.add(ino, blk, "%s: entry %d header past its area", what, n)
			return nil
		}
		e := disk.DecodeXattrEntry(ents[p:])
		size := disk.XattrEntrySize(int(e.NameLen))
		if e.NameLen == 0 && !disk.XattrWholeName(e.NameIndex) || p+size > len(ents) {
			c.add(ino, blk, "%s: entry %d name (%d bytes) bad or past its area", what, n, e.NameLen)
			return nil
		}
		name := ents[p+disk.XattrEntryLen : p+disk.XattrEntryLen+int(e.NameLen)]
		regions = append(regions, region{entOff + p, entOff + p + size})
		if e.ValueInum != 0 {
			c.add(ino, blk, "%s: entry %d keeps its value in inode %d (ea_inode not supported)", what, n, e.ValueInum)
			return nil
		}
		vo, vs := int(e.ValueOffs), int64(e.ValueSize)
		if vs > int64(len(base)) || vo+int(vs) > len(base) {
			c.add(ino, blk, "%s: entry %d value (%d bytes at %d) past its area", what, n, vs, vo)
			return nil
		}
		value := base[vo : vo+int(vs)]
		if vs > 0 {
			if vo < entOff && !inInode || vo%4 != 0 {
				c.add(ino, blk, "%s: entry %d value offset %d", what, n, vo)
			}
			regions = append(regions, region{vo, vo + disk.XattrValueSize(int(vs))})
		}
		if _, ok := disk.XattrJoinName(e.NameIndex, string(name)); !ok {
			c.add(ino, blk, "%s: entry %d has unknown name index %d", what, n, e.NameIndex)
		}
		h := disk.XattrEntryHash(name, value)
		if e.Hash != h && e.Hash != xattrHashSigned(name, value) && !(inInode && e.Hash == 0) {
			c.add(ino, blk, "%s: entry %d hash %#x, computed %#x", what, n, e.Hash, h)
		}
		hashes = append(hashes, e.Hash)
		p += size
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].lo < regions[j].lo })
	for i := 1; i < len(regions); i++ {
		if regions[i].lo < regions[i-1].hi {
			c.add(ino, blk, "%s: entries and values overlap at byte %d", what, regions[i].lo)
			return nil
		}
	}
	if len(regions) > 0 && regions[len(regions)-1].hi > len(base) {
		c.add(ino, blk, "%s: value padding runs past the area", what)
	}
	return hashes
}

// xattrHashSigned is the entry hash older kernels computed with signed
// chars; e2fsck accepts either.
func xattrHashSigned(name, value []byte) uint32 {
	var h uint32
	for _, ch := range name {
		h = (h << 5) ^ (h >> 27) ^ uint32(int32(int8(ch)))
	}
	for i := 0; i < len(value); i += 4 {
		var w [4]byte
		copy(w[:], value[i:])
		h = (h << 16) ^ (h >> 16) ^ binary.LittleEndian.Uint32(w[:])
	}
	return h
}

// checkXattrRefs compares each shared block's refcount with its users.
func (c *checker) checkXattrRefs() {
	blks := make([]uint64, 0, len(c.xattrs))
	for b := range c.xattrs {
		blks = append(blks, b)
	}
	sort.Slice(blks, func(i, j int) bool { return blks[i] < blks[j] })
	for _, b := range blks {
		if x := c.xattrs[b]; x.ok && x.refcount != x.users {
			c.add(0, b, "xattr block: reference count %d, used by %d inode(s)", x.refcount, x.users)
		}
	}
}
