package ext4lite

import (
	"fmt"
	"sort"
	"syscall"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// dirent is one directory entry held in memory.
type dirent struct {
	ino uint32
	ft  uint8
}

// dir is a directory's entries, loaded whole on first use and written
// back whole (as a linear block or an htree) when changed. Keeping the map
// in memory makes lookups O(1) and insertions cheap for 100 000-entry
// directories; the write-back is linear in the directory's size.
type dir struct {
	parent  uint32
	entries map[string]dirent // without "." and ".."
	dirty   bool
	// hashes caches each name's htree hash (major<<32 | minor) across
	// write-backs, so rewriting a big directory costs a sort, not a
	// rehash of every name.
	hashes map[string]uint64
}

// loadDir reads in's directory blocks. Every block is read as a linear
// block: htree interior blocks look like one empty entry by design, and the
// root's ".." entry spans the dx data.
func (v *FS) loadDir(in *inode) (*dir, error) {
	if d, ok := v.dirs[in.ino]; ok {
		return d, nil
	}
	if !in.isDir() {
		return nil, errNotDir
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return nil, err
	}
	size := in.d.Size()
	if max := v.opts.maxDirSize(); size > max {
		return nil, &LimitError{Op: "readdir", What: fmt.Sprintf("size of directory inode %d (Options.MaxDirSize)", in.ino), Size: size, Max: max, Errno: syscall.EFBIG}
	}
	if size%uint64(v.bs) != 0 {
		return nil, corruptf(-1, in.ino, "directory size %d is not a multiple of the block size", size)
	}
	d := &dir{entries: make(map[string]dirent)}
	b := make([]byte, v.bs)
	nblocks := size / uint64(v.bs)
	for lblk := uint64(0); lblk < nblocks; lblk++ {
		phys, _, uninit, ok := m.lookup(uint32(lblk))
		if !ok || uninit {
			return nil, corruptf(-1, in.ino, "directory has a hole at block %d", lblk)
		}
		if err := v.readBlock(phys, b); err != nil {
			return nil, err
		}
		if err := v.parseDirBlock(in, d, b, lblk, int64(phys)*int64(v.bs)); err != nil {
			return nil, err
		}
	}
	if d.parent == 0 {
		return nil, corruptf(-1, in.ino, "directory has no '..' entry")
	}
	if v.readOnly {
		if v.cachedDirents+len(d.entries) > readOnlyCachedDirents {
			v.forgetReadOnlyCache() // inode.go
		}
		v.cachedDirents += len(d.entries)
	}
	v.dirs[in.ino] = d
	return d, nil
}

func (v *FS) parseDirBlock(in *inode, d *dir, b []byte, lblk uint64, off int64) error {
	end := len(b)
	if in.d.Flags&disk.FlagIndex != 0 {
		if dx, err := v.checkDxBlock(in, b, lblk, off); err != nil || dx {
			if err == nil && lblk == 0 {
				// The root's "." and ".." (".." spans the index data).
				de := disk.DecodeDirent(b[12:])
				d.parent = de.Inode
			}
			return err
		}
	}
	if v.csum && disk.HasDirTail(b) {
		if disk.StoredDirTailChecksum(b) != disk.DirBlockChecksum(v.seedOf(in), b) {
			return corruptf(off, in.ino, "directory block %d checksum mismatch", lblk)
		}
		end -= disk.DirTailSize
	}
	for p := 0; p < end; {
		if p+disk.DirentHeaderSize > end {
			return corruptf(off+int64(p), in.ino, "directory entry header past the block end")
		}
		de := disk.DecodeDirent(b[p:])
		rl := disk.DecodeRecLen(de.RecLen, v.bs)
		if rl < disk.DirentHeaderSize || rl%4 != 0 || p+rl > len(b) || disk.DirentHeaderSize+int(de.NameLen) > rl {
			return corruptf(off+int64(p), in.ino, "directory entry with rec_len %d, name_len %d", rl, de.NameLen)
		}
		if de.Inode != 0 {
			if de.Inode > v.sb.InodesCount {
				return corruptf(off+int64(p), in.ino, "directory entry points at inode %d", de.Inode)
			}
			name := string(b[p+disk.DirentHeaderSize : p+disk.DirentHeaderSize+int(de.NameLen)])
			switch {
			case name == "." && lblk == 0 && p == 0:
			case name == ".." && lblk == 0:
				d.parent = de.Inode
			case name == "" || name == "." || name == ".." || containsSlashOrNul(name):
				return corruptf(off+int64(p), in.ino, "invalid name %q in directory", name)
			default:
				d.entries[name] = dirent{ino: de.Inode, ft: de.FileType}
			}
		}
		p += rl
	}
	return nil
}

func containsSlashOrNul(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == 0 {
			return true
		}
	}
	return false
}

// newDir makes an empty directory structure for a new directory inode.
func (v *FS) newDir(ino, parent uint32) *dir {
	d := &dir{parent: parent, entries: make(map[string]dirent), dirty: true}
	v.dirs[ino] = d
	v.dirsSinceFlush++
	return d
}

// sortedNames returns d's names in byte order.
func (d *dir) sortedNames() []string {
	names := make([]string, 0, len(d.entries))
	for n := range d.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// storeDir writes a changed directory back: linear when it fits one block,
// else an htree (dx_dir) — what the kernel would have built.
func (v *FS) storeDir(in *inode, d *dir) error {
	if !d.dirty {
		return nil
	}
	var blocks [][]byte
	if v.sb.FeatureCompat&disk.CompatDirIndex != 0 && !v.linearFits(d) {
		var err error
		blocks, err = v.buildHtree(in, d)
		if err != nil {
			return err
		}
		in.d.Flags |= disk.FlagIndex
	} else {
		blocks = v.buildLinear(in, d)
		in.d.Flags &^= disk.FlagIndex
	}
	if err := v.writeDirBlocks(in, blocks); err != nil {
		return err
	}
	d.dirty = false
	return nil
}

// usable is the space for entries in a leaf block.
func (v *FS) leafSpace() int {
	if v.csum {
		return v.bs - disk.DirTailSize
	}
	return v.bs
}

func (v *FS) linearFits(d *dir) bool {
	need := disk.DirentRecLen(1) + disk.DirentRecLen(2)
	for n := range d.entries {
		need += disk.DirentRecLen(len(n))
		if need > v.leafSpace() {
			return false
		}
	}
	return true
}

// leafEntry is an entry to lay out in a leaf block.
type leafEntry struct {
	name string
	de   dirent
}

// fillLeaves packs entries into leaf blocks in order, starting with
// prefix bytes of space used in the first block. It returns each block's
// entries.
func (v *FS) fillLeaves(ents []leafEntry, firstUsed int) [][]leafEntry {
	var out [][]leafEntry
	var cur []leafEntry
	used := firstUsed
	for _, e := range ents {
		rl := disk.DirentRecLen(len(e.name))
		if used+rl > v.leafSpace() && (len(cur) > 0 || used > 0) {
			out = append(out, cur)
			cur, used = nil, 0
		}
		cur = append(cur, e)
		used += rl
	}
	return append(out, cur)
}

// encodeLeaf writes entries into a fresh block; the last entry's rec_len
// runs to the end of the usable space.
func (v *FS) encodeLeaf(in *inode, ents []leafEntry, dots bool, parent uint32) []byte {
	b := make([]byte, v.bs)
	space := v.leafSpace()
	p := 0
	type rec struct {
		off  int
		name string
		de   dirent
	}
	var recs []rec
	if dots {
		recs = append(recs, rec{0, ".", dirent{in.ino, disk.FtDir}}, rec{12, "..", dirent{parent, disk.FtDir}})
	}
	for _, e := range ents {
		recs = append(recs, rec{name: e.name, de: e.de})
	}
	for i := range recs {
		recs[i].off = p
		p += disk.DirentRecLen(len(recs[i].name))
	}
	if len(recs) == 0 {
		// An empty leaf: one unused entry spanning the block.
		disk.PutDirent(b, 0, int(disk.EncodeRecLen(space, v.bs)), 0, "")
	}
	for i, r := range recs {
		rl := disk.DirentRecLen(len(r.name))
		if i == len(recs)-1 {
			rl = space - r.off
		}
		disk.PutDirent(b[r.off:], r.de.ino, int(disk.EncodeRecLen(rl, v.bs)), r.de.ft, r.name)
	}
	if v.csum {
		disk.PutDirTail(b, v.seedOf(in))
	}
	return b
}

func (v *FS) buildLinear(in *inode, d *dir) [][]byte {
	var ents []leafEntry
	for _, n := range d.sortedNames() {
		ents = append(ents, leafEntry{n, d.entries[n]})
	}
	dotSpace := disk.DirentRecLen(1) + disk.DirentRecLen(2)
	leaves := v.fillLeaves(ents, dotSpace)
	blocks := make([][]byte, len(leaves))
	for i, l := range leaves {
		blocks[i] = v.encodeLeaf(in, l, i == 0, d.parent)
	}
	return blocks
}

// writeDirBlocks makes in's data exactly these blocks: existing blocks are
// reused in place, missing ones allocated, extra ones freed.
func (v *FS) writeDirBlocks(in *inode, blocks [][]byte) error {
	m, err := v.loadExtents(in)
	if err != nil {
		return err
	}
	n := uint32(len(blocks))
	for _, r := range m.truncate(n) {
		if err := v.freeBlocks(r[0], r[1]); err != nil {
			return err
		}
	}
	for i := uint32(0); i < n; {
		phys, run, uninit, ok := m.lookup(i)
		if ok && !uninit {
			for j := uint32(0); j < run && i < n; j++ {
				if err := v.metaWriteBlock(phys+uint64(j), blocks[i]); err != nil {
					return err
				}
				i++
			}
			continue
		}
		want := n - i
		if run > 0 {
			want = min(want, run)
		}
		goal := m.lastPhysEnd()
		start, got, err := v.allocBlocks(goal, int(want))
		if err != nil {
			return err
		}
		m.insert(i, start, uint32(got))
		for j := 0; j < got; j++ {
			if err := v.metaWriteBlock(start+uint64(j), blocks[i]); err != nil {
				return err
			}
			i++
		}
	}
	in.d.SetSize(uint64(n) * uint64(v.bs))
	in.dirty = true
	return nil
}

// checkDxBlock recognizes an htree index block (the root at block 0, or an
// interior node: one empty entry spanning the block) and verifies its
// checksum. A dx block's tail can look like a leaf's checksum tail (the
// kernel leaves the old leaf tail's bytes in dt_reserved), so index blocks
// must be recognized by position and shape, never by their tail.
func (v *FS) checkDxBlock(in *inode, b []byte, lblk uint64, off int64) (bool, error) {
	var entriesOff int
	if lblk == 0 {
		dot, dotdot := disk.DecodeDirent(b), disk.DecodeDirent(b[12:])
		info := disk.DecodeDxRootInfo(b)
		if dot.RecLen != 12 || dot.NameLen != 1 || b[8] != '.' || dotdot.NameLen != 2 ||
			disk.DecodeRecLen(dotdot.RecLen, v.bs) != v.bs-12 || info.InfoLength != disk.DxRootInfoLen {
			return false, corruptf(off, in.ino, "indexed directory without a valid htree root")
		}
		if dot.Inode != in.ino {
			return false, corruptf(off, in.ino, "'.' points at inode %d", dot.Inode)
		}
		entriesOff = disk.DxRootEntries
	} else {
		de := disk.DecodeDirent(b)
		if de.Inode != 0 || disk.DecodeRecLen(de.RecLen, v.bs) != v.bs {
			return false, nil // a leaf
		}
		entriesOff = disk.DxNodeEntries
		// An empty leaf of a non-csum volume looks the same: both hold no
		// entries, so treating it as an index block loses nothing.
	}
	if v.csum {
		count, limit := disk.DxCountLimit(b, entriesOff)
		if limit != disk.DxLimit(v.bs, entriesOff, true) {
			if lblk != 0 {
				return true, nil // an empty leaf (limit field is garbage)
			}
			return false, corruptf(off, in.ino, "htree root limit %d", limit)
		}
		if count > limit {
			return false, corruptf(off, in.ino, "htree node count %d over limit %d", count, limit)
		}
		if disk.StoredDxChecksum(b, entriesOff, limit) != disk.DxChecksum(v.seedOf(in), b, entriesOff, count, limit) {
			return false, corruptf(off, in.ino, "htree block %d checksum mismatch", lblk)
		}
	}
	return true, nil
}
