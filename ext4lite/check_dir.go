package ext4lite

// This file holds Check's pass over directories — linear and htree blocks,
// entries, "." and "..".

import (
	"sort"
	"strings"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// dirInos lists the in-use directories in order.
func (c *checker) dirInos() []uint32 {
	var out []uint32
	for ino, ci := range c.inodes {
		if ci.mode&disk.ModeTypeMask == disk.ModeDir && (ino >= c.sb.FirstIno || ino == disk.RootIno) {
			out = append(out, ino)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// dirWalk is the state of one directory's check.
type dirWalk struct {
	ino   uint32
	ci    *cInode
	seed  uint32
	names map[string]bool
	hver  uint8
	dots  int // "." and ".." seen
}

// directories parses every directory and records entries, links and
// parents.
func (c *checker) directories() {
	c.counted = map[uint32]uint32{}
	c.named = map[uint32]uint32{}
	c.children = map[uint32][]uint32{}
	for _, ino := range c.dirInos() {
		if c.stop {
			return
		}
		ci := c.inodes[ino]
		c.rep.Dirs++
		if !ci.extOK {
			continue // the tree is damaged: already a finding
		}
		d := &dirWalk{ino: ino, ci: ci, seed: disk.InodeSeed(c.seed, ino, ci.gen), names: map[string]bool{}}
		if ci.flags&disk.FlagIndex != 0 && c.dirIndex {
			c.htreeDir(d)
		} else {
			c.linearDir(d)
		}
		if d.dots < 2 {
			c.add(ino, 0, "directory lacks its '.' and '..' entries")
		}
	}
}

// dirBlocks calls fn for each of the directory's blocks in logical order.
func (c *checker) dirBlocks(d *dirWalk, fn func(lblk uint32, phys uint64, b []byte)) {
	b := make([]byte, c.bs)
	for _, e := range d.ci.ext {
		if e.Uninit {
			continue
		}
		for i := uint32(0); i < uint32(e.Len) && !c.stop; i++ {
			phys := e.Start + uint64(i)
			if !c.readBlock(phys, b, d.ino, "directory block") {
				return
			}
			fn(e.Block+i, phys, b)
		}
	}
}

func (c *checker) linearDir(d *dirWalk) {
	c.dirBlocks(d, func(lblk uint32, phys uint64, b []byte) {
		c.leaf(d, lblk, phys, b, lblk == 0, nil)
	})
}

// hashRange bounds the major hashes a dx leaf may hold: [lo&^1, hi) — or
// up to hi&^1 inclusive when hi has the collision bit (the names hashing
// to it continue from this leaf into the next).
type hashRange struct {
	lo uint32
	hi uint64 // 1<<32 for "no upper bound"
}

func (r hashRange) holds(h uint32) bool {
	if h < r.lo&^1 {
		return false
	}
	if r.hi > 0xFFFFFFFF {
		return true
	}
	if r.hi&1 != 0 {
		return uint64(h) <= r.hi&^1
	}
	return uint64(h) < r.hi
}

// htreeDir checks an indexed directory: the dx root and interior nodes,
// then every leaf against the hash range its index gives it.
func (c *checker) htreeDir(d *dirWalk) {
	nblocks := uint32(0)
	for _, e := range d.ci.ext {
		nblocks = max(nblocks, e.Block+uint32(e.Len))
	}
	if nblocks == 0 {
		return
	}
	blocks := map[uint32]uint64{} // lblk → phys
	for _, e := range d.ci.ext {
		for i := uint32(0); i < uint32(e.Len); i++ {
			blocks[e.Block+i] = e.Start + uint64(i)
		}
	}
	root := make([]byte, c.bs)
	if _, ok := blocks[0]; !ok {
		return // a hole at block 0: dirSize reported it
	}
	if !c.readBlock(blocks[0], root, d.ino, "htree root") {
		return
	}
	kind := map[uint32]string{0: "root"}
	ranges := map[uint32]hashRange{}
	ok := c.dxRoot(d, root, blocks[0], func(lvl int, lblk uint32, r hashRange) bool {
		if lblk == 0 || lblk >= nblocks {
			c.add(d.ino, 0, "htree index points at logical block %d of %d", lblk, nblocks)
			return false
		}
		if k, dup := kind[lblk]; dup {
			c.add(d.ino, 0, "htree: logical block %d referenced twice (already a %s)", lblk, k)
			return false
		}
		if lvl > 0 {
			kind[lblk] = "node"
		} else {
			kind[lblk] = "leaf"
			ranges[lblk] = r
		}
		return true
	}, blocks)
	c.dirBlocks(d, func(lblk uint32, phys uint64, b []byte) {
		switch k := kind[lblk]; {
		case lblk == 0:
			c.dotsOfRoot(d, root, phys)
		case k == "node":
		case k == "leaf" && ok:
			r := ranges[lblk]
			c.leaf(d, lblk, phys, b, false, &r)
		default:
			if ok {
				c.add(d.ino, phys, "htree: directory block %d is not referenced by the index", lblk)
			}
			c.leaf(d, lblk, phys, b, false, nil)
		}
	})
}

// dxRoot checks the root and interior nodes, calling visit for each child
// (level > 0 for interior nodes). It reports whether the index is sound.
func (c *checker) dxRoot(d *dirWalk, root []byte, phys uint64, visit func(level int, lblk uint32, r hashRange) bool, blocks map[uint32]uint64) bool {
	info := disk.DecodeDxRootInfo(root)
	levels := int(info.IndirectLevels)
	maxLevels := disk.DxMaxLevels
	if c.largeDir {
		maxLevels = disk.DxMaxLevelsBig
	}
	hv := info.HashVersion
	if hv <= disk.HashTea && c.sb.Flags&disk.FlagUnsignedHash != 0 {
		hv += 3
	}
	d.hver = hv
	switch {
	case info.ReservedZero != 0:
		c.add(d.ino, phys, "htree root: reserved field %#x", info.ReservedZero)
		return false
	case info.InfoLength != disk.DxRootInfoLen:
		c.add(d.ino, phys, "htree root: info length %d", info.InfoLength)
		return false
	case levels >= maxLevels:
		c.add(d.ino, phys, "htree root: %d indirect levels", levels)
		return false
	case hv > disk.HashTeaUnsigned:
		c.add(d.ino, phys, "htree root: hash version %d", info.HashVersion)
		return false
	}
	return c.dxNode(d, root, phys, disk.DxRootEntries, levels, hashRange{0, 1 << 32}, visit, blocks)
}

// dxNode checks one index node's entries (at off) and descends.
func (c *checker) dxNode(d *dirWalk, b []byte, phys uint64, off, level int, r hashRange, visit func(int, uint32, hashRange) bool, blocks map[uint32]uint64) bool {
	count, limit := disk.DxCountLimit(b, off)
	if want := disk.DxLimit(c.bs, off, c.csum); limit != want {
		c.add(d.ino, phys, "htree node: limit %d, want %d", limit, want)
		return false
	}
	if count == 0 || count > limit {
		c.add(d.ino, phys, "htree node: count %d (limit %d)", count, limit)
		return false
	}
	if c.csum {
		if got, want := disk.StoredDxChecksum(b, off, limit), disk.DxChecksum(d.seed, b, off, count, limit); got != want {
			c.add(d.ino, phys, "htree node: checksum %#x, computed %#x", got, want)
		}
	}
	ents := make([]disk.DxEntry, count)
	for i := range ents {
		ents[i] = disk.DxEntryAt(b, off, i)
	}
	ok := true
	for i := 1; i < count; i++ {
		if ents[i].Hash < ents[i-1].Hash || !r.holds(ents[i].Hash&^1) && i > 0 {
			c.add(d.ino, phys, "htree node: key %d (%#x) out of order or outside [%#x, %#x)", i, ents[i].Hash, r.lo, r.hi)
			return false
		}
	}
	child := make([]byte, c.bs)
	for i, e := range ents {
		cr := hashRange{r.lo, r.hi}
		if i > 0 {
			cr.lo = e.Hash
		}
		if i+1 < count {
			cr.hi = uint64(ents[i+1].Hash)
		}
		if !visit(level, e.Block, cr) {
			ok = false
			continue
		}
		if level == 0 {
			continue
		}
		cphys, mapped := blocks[e.Block]
		if !mapped || !c.readBlock(cphys, child, d.ino, "htree node") {
			ok = false
			continue
		}
		fake := disk.DecodeDirent(child)
		if fake.Inode != 0 || disk.DecodeRecLen(fake.RecLen, c.bs) != c.bs || fake.NameLen != 0 {
			c.add(d.ino, cphys, "htree node: bad header entry (inode %d, rec_len %d)", fake.Inode, fake.RecLen)
			ok = false
			continue
		}
		if !c.dxNode(d, child, cphys, disk.DxNodeEntries, level-1, cr, visit, blocks) {
			ok = false
		}
	}
	return ok
}

// dotsOfRoot checks "." and ".." of a dx root block.
func (c *checker) dotsOfRoot(d *dirWalk, b []byte, phys uint64) {
	dot := disk.DecodeDirent(b)
	dotdot := disk.DecodeDirent(b[12:])
	if dot.Inode != d.ino || dot.NameLen != 1 || b[8] != '.' || disk.DecodeRecLen(dot.RecLen, c.bs) != 12 {
		c.add(d.ino, phys, "htree root: bad '.' entry")
	} else {
		c.entry(d, ".", dot.Inode, dot.FileType, phys)
	}
	if dotdot.NameLen != 2 || b[20] != '.' || b[21] != '.' || disk.DecodeRecLen(dotdot.RecLen, c.bs) != c.bs-12 {
		c.add(d.ino, phys, "htree root: bad '..' entry")
	} else {
		c.entry(d, "..", dotdot.Inode, dotdot.FileType, phys)
	}
}

// leaf parses one directory leaf block. dots says it starts with "." and
// "..". r, when set, bounds the names' hashes.
func (c *checker) leaf(d *dirWalk, lblk uint32, phys uint64, b []byte, dots bool, r *hashRange) {
	end := c.bs
	if c.csum {
		if !disk.HasDirTail(b) {
			c.add(d.ino, phys, "directory block %d has no checksum tail", lblk)
		} else {
			end -= disk.DirTailSize
			if got, want := disk.StoredDirTailChecksum(b), disk.DirBlockChecksum(d.seed, b); got != want {
				c.add(d.ino, phys, "directory block %d checksum %#x, computed %#x", lblk, got, want)
			}
		}
	}
	n := 0
	for p := 0; p < end; n++ {
		if p+disk.DirentHeaderSize > end {
			c.add(d.ino, phys, "directory block %d: entry header at %d past the end", lblk, p)
			return
		}
		de := disk.DecodeDirent(b[p:])
		rl := disk.DecodeRecLen(de.RecLen, c.bs)
		if rl < 12 || rl%4 != 0 || p+rl > end || disk.DirentHeaderSize+int(de.NameLen) > rl {
			c.add(d.ino, phys, "directory block %d: entry at %d has rec_len %d, name_len %d", lblk, p, rl, de.NameLen)
			return
		}
		name := string(b[p+disk.DirentHeaderSize : p+disk.DirentHeaderSize+int(de.NameLen)])
		p += rl
		if dots && n < 2 {
			want := [2]string{".", ".."}[n]
			if name != want || de.Inode == 0 {
				c.add(d.ino, phys, "entry %d of the first block is %q, want %q", n, name, want)
				continue
			}
			if n == 0 && de.Inode != d.ino {
				c.add(d.ino, phys, "'.' points at inode %d", de.Inode)
				continue
			}
			c.entry(d, name, de.Inode, de.FileType, phys)
			continue
		}
		if de.Inode == 0 {
			continue
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			c.add(d.ino, phys, "directory block %d: bad name %q", lblk, name)
			continue
		}
		if r != nil {
			h, _, ok := disk.DirHash(d.hver, []byte(name), c.sb.HashSeed)
			if ok && !r.holds(h) {
				c.add(d.ino, phys, "htree leaf %d: %q hashes to %#x, outside [%#x, %#x)", lblk, name, h, r.lo, r.hi)
			}
		}
		if d.names[name] {
			c.add(d.ino, phys, "duplicate entry %q", name)
			continue
		}
		if len(d.names) < 1<<22 {
			d.names[name] = true
		}
		c.entry(d, name, de.Inode, de.FileType, phys)
	}
}

// entry records one directory entry and checks its target.
func (c *checker) entry(d *dirWalk, name string, target uint32, ft uint8, phys uint64) {
	if name == "." || name == ".." {
		d.dots++
	}
	if target > c.sb.InodesCount {
		c.add(d.ino, phys, "entry %q points at inode %d (of %d)", name, target, c.sb.InodesCount)
		return
	}
	t := c.inodes[target]
	if t == nil || (target < c.sb.FirstIno && target != disk.RootIno) {
		c.add(d.ino, phys, "entry %q points at unused or reserved inode %d", name, target)
		return
	}
	if c.filetype {
		if want := disk.FileTypeOfMode(t.mode); ft != want {
			c.add(d.ino, phys, "entry %q has file type %d, inode %d is a %s", name, ft, target, typeWord(uint32(t.mode)&disk.ModeTypeMask))
		}
	} else if ft != 0 {
		c.add(d.ino, phys, "entry %q has file type %d without the filetype feature", name, ft)
	}
	c.counted[target]++
	isDir := t.mode&disk.ModeTypeMask == disk.ModeDir
	switch {
	case name == ".":
	case name == "..":
		if !isDir {
			c.add(d.ino, phys, "'..' points at inode %d, not a directory", target)
			return
		}
		d.ci.parent = target
	default:
		if isDir {
			// A directory has one parent (e2fsck: "is a link to directory",
			// "is a link to the root inode"): a second name makes a cycle
			// or a shared subtree, and tree walks enter it once.
			if target == disk.RootIno {
				c.add(d.ino, phys, "entry %q is a link to the root directory", name)
				return
			}
			if p, dup := c.named[target]; dup {
				c.add(d.ino, phys, "entry %q is a second link to directory %d (first in %d)", name, target, p)
				return
			}
			c.named[target] = d.ino
		}
		if len(c.children[d.ino]) < 1<<24 {
			c.children[d.ino] = append(c.children[d.ino], target)
		}
	}
}
