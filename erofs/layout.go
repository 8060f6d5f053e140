package erofs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// layout is where one inode goes in the image.
type layout struct {
	ino      uint32 // i_ino: 1-based position in nid order
	nid      uint64
	extended bool
	nlink    uint32
	inline   []xattrKV // inline xattrs, sorted by name
	shared   []uint32  // shared xattr ids, sorted by name
	xsize    int       // xattr ibody bytes
	size     int64     // i_size
	tail     int       // bytes of data packed after the inode (FLAT_INLINE)
	blkaddr  uint32    // first data block
	nblocks  int64     // data blocks
	dir      [][]dirent
}

type xattrKV struct {
	name  string
	index uint8
	sfx   string
	value []byte
}

func (x *xattrKV) entryLen() int { return disk.XattrEntryLen(len(x.sfx), len(x.value)) }

type dirent struct {
	name string
	n    *inode
}

// gap is free metadata space [off, end) inside one block.
type gap struct{ off, end int64 }

const maxGaps = 256

func alignSlot(n int64) int64 { return (n + disk.SlotSize - 1) &^ (disk.SlotSize - 1) }

// takeGap places size bytes in the first gap that holds them.
func takeGap(gaps []gap, size int64) (int64, bool) {
	for i := range gaps {
		g := &gaps[i]
		if g.end-g.off >= size {
			off := g.off
			g.off = alignSlot(off + size)
			return off, true
		}
	}
	return 0, false
}

// addGap records a gap, dropping used-up ones and, past maxGaps, the
// smallest, so placement stays cheap.
func addGap(gaps []gap, g gap) []gap {
	gaps = slices.DeleteFunc(gaps, func(x gap) bool { return x.end-x.off < disk.SlotSize })
	gaps = append(gaps, g)
	if len(gaps) > maxGaps {
		i := 0
		for j := range gaps {
			if gaps[j].end-gaps[j].off < gaps[i].end-gaps[i].off {
				i = j
			}
		}
		gaps = slices.Delete(gaps, i, i+1)
	}
	return gaps
}

// plan is the whole image's geometry.
type plan struct {
	inodes     []*inode // in nid order; inodes[0] is the root
	epoch      time.Time
	shared     []xattrKV // the shared xattr area, in order
	metaBlocks uint32
	xattrBlk   uint32 // 0 when there are no shared xattrs
	xattrLen   int64
	blocks     uint32
}

// order lists the inodes breadth-first, children by name: the root first
// (its nid must fit the superblock's 16 bits), each hard-linked inode once.
// It fills every directory's sorted entries, sorted by the workers.
func (b *Builder) order() []*inode {
	var dirs []*inode
	for stack := []*inode{b.root}; len(stack) > 0; {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dirs = append(dirs, n)
		for _, k := range n.kids {
			if k.kids != nil { // directories have one name each
				stack = append(stack, k)
			}
		}
	}
	parallelFor(len(dirs), b.workers(), func(i int) {
		d := dirs[i]
		s := make([]dirent, 0, len(d.kids))
		for name, k := range d.kids {
			s = append(s, dirent{name, k})
		}
		slices.SortFunc(s, func(a, b dirent) int { return cmp.Compare(a.name, b.name) })
		d.sorted = s
	})
	b.mark++
	q := []*inode{b.root}
	b.root.mark = b.mark
	for i := 0; i < len(q); i++ {
		for _, e := range q[i].sorted {
			if e.n.mark != b.mark {
				e.n.mark = b.mark
				q = append(q, e.n)
			}
		}
	}
	return q
}

// chooseEpoch returns the most common mtime (earliest on ties).
func chooseEpoch(ns []*inode) time.Time {
	type key struct {
		sec  int64
		nsec int
	}
	count := map[key]int{}
	var best time.Time
	bestN := 0
	for _, n := range ns {
		k := key{n.mtime.Unix(), n.mtime.Nanosecond()}
		c := count[k] + 1
		count[k] = c
		if c > bestN || c == bestN && n.mtime.Before(best) {
			best, bestN = n.mtime, c
		}
	}
	return best
}

func fileType(mode uint32) uint8 {
	switch mode & sink.TypeMask {
	case sink.TypeReg:
		return disk.FTRegFile
	case sink.TypeDir:
		return disk.FTDir
	case sink.TypeChar:
		return disk.FTChrdev
	case sink.TypeBlock:
		return disk.FTBlkdev
	case sink.TypeFifo:
		return disk.FTFifo
	case sink.TypeSocket:
		return disk.FTSock
	case sink.TypeSymlink:
		return disk.FTSymlink
	}
	return disk.FTUnknown
}

// dirBlocks packs a directory's entries, "." and ".." included, sorted by
// name bytes, into blocks, and returns the directory's i_size.
func dirBlocks(n *inode) ([][]dirent, int64) {
	all := make([]dirent, 0, len(n.sorted)+2)
	all = append(all, n.sorted...) // by order
	for _, d := range []dirent{{".", n}, {"..", n.parent}} {
		i, _ := slices.BinarySearchFunc(all, d.name, func(e dirent, name string) int { return cmp.Compare(e.name, name) })
		all = slices.Insert(all, i, d)
	}
	var blocks [][]dirent
	used, start := 0, 0
	for i, e := range all {
		need := disk.DirentSize + len(e.name)
		if used+need > disk.BlockSize {
			blocks = append(blocks, all[start:i])
			start, used = i, 0
		}
		used += need
	}
	blocks = append(blocks, all[start:])
	return blocks, int64(len(blocks)-1)*disk.BlockSize + int64(used)
}

func xattrKey(name string, v []byte) string { return name + "\x00" + string(v) }

// plan lays the tree out: metadata (superblock, then inodes with their
// xattrs and inline tails) from offset 0, the shared xattr area, then data
// blocks in nid order.
func (b *Builder) plan() (*plan, error) {
	p := &plan{inodes: b.order()}
	p.epoch = normTime(b.opts.Epoch)
	if b.opts.Epoch.IsZero() {
		p.epoch = chooseEpoch(p.inodes)
	}
	full := b.opts.Profile == ProfileFull

	// Xattr (name, value) pairs on more than one inode are shared.
	uses := map[string]int{}
	for _, n := range p.inodes {
		for k, v := range n.xattrs {
			uses[xattrKey(k, v)]++
		}
	}
	sharedID := map[string]uint32{}
	var sharedKeys []xattrKV
	for _, n := range p.inodes {
		for k, v := range n.xattrs {
			key := xattrKey(k, v)
			if _, ok := sharedID[key]; !ok && uses[key] > 1 {
				sharedID[key] = 0
				idx, sfx, _ := xattrSplit(k)
				sharedKeys = append(sharedKeys, xattrKV{k, idx, sfx, v})
			}
		}
	}
	slices.SortFunc(sharedKeys, func(a, b xattrKV) int {
		return cmp.Or(cmp.Compare(a.name, b.name), slices.Compare(a.value, b.value))
	})
	var off int64
	for _, x := range sharedKeys {
		sharedID[xattrKey(x.name, x.value)] = uint32(off / 4)
		off += int64(x.entryLen())
	}
	if off > 4*int64(^uint32(0)) {
		return nil, fmt.Errorf("%w: shared xattr area of %d bytes", ErrNoSpace, off)
	}
	p.shared, p.xattrLen = sharedKeys, off

	// Inode sizes and data sizes.
	for i, n := range p.inodes {
		l := &n.l
		*l = layout{ino: uint32(i + 1), nlink: n.nlink}
		switch n.mode & sink.TypeMask {
		case sink.TypeReg:
			l.size = n.size
		case sink.TypeSymlink:
			l.size = int64(len(n.link))
		case sink.TypeDir:
			l.dir, l.size = dirBlocks(n)
			l.nlink = 2
			for _, k := range n.kids {
				if k.kids != nil {
					l.nlink++
				}
			}
		}
		l.extended = n.uid > 0xffff || n.gid > 0xffff || l.nlink > 0xffff ||
			l.size > 0xffffffff || !n.mtime.Equal(p.epoch)
		if len(n.xattrs) > 0 {
			l.xsize = disk.XattrIbodyHeaderSize
			for _, k := range slices.Sorted(maps.Keys(n.xattrs)) {
				v := n.xattrs[k]
				if id, ok := sharedID[xattrKey(k, v)]; ok && len(l.shared) < 255 {
					l.shared = append(l.shared, id)
					l.xsize += 4
					continue
				}
				idx, sfx, _ := xattrSplit(k)
				x := xattrKV{k, idx, sfx, v}
				l.inline = append(l.inline, x)
				l.xsize += x.entryLen()
			}
			if disk.XattrIbodySize(disk.XattrIbodyMaxIcount) < l.xsize {
				return nil, fmt.Errorf("%w: %d bytes of xattrs on one inode (EROFS holds %d)", ErrUnsupported, l.xsize, disk.XattrIbodySize(disk.XattrIbodyMaxIcount))
			}
		}
		// Tails are packed after the inode, except regular files' in the
		// runtime profile: the Sentry maps those straight from the image
		// (Inode.DataOffset), which only FLAT_PLAIN allows. Its directory
		// and symlink readers take inline data, as the kernel's do.
		if t := int(l.size % disk.BlockSize); t != 0 {
			switch n.mode & sink.TypeMask {
			case sink.TypeReg:
				if full {
					l.tail = t
				}
			case sink.TypeDir, sink.TypeSymlink:
				l.tail = t
			}
		}
	}

	// Metadata: inodes from just past the superblock, 32-byte aligned. An
	// inode with inline data keeps inode, xattrs and tail in one block
	// (what the kernel and gVisor require of the tail); when it would
	// straddle, it starts the next block, or gives up inlining if it cannot
	// fit a block at all. The gap it leaves is filled first-fit by later
	// inodes, so the padding costs little.
	cur := int64(disk.SuperOffset + disk.SuperSize)
	var gaps []gap
	for _, n := range p.inodes {
		l := &n.l
		size := int64(disk.InodeCompactSize + l.xsize)
		if l.extended {
			size = int64(disk.InodeExtendedSize + l.xsize)
		}
		if l.tail > 0 && size+int64(l.tail) > disk.BlockSize {
			l.tail = 0
		}
		size += int64(l.tail)
		off, ok := takeGap(gaps, size)
		if !ok {
			cur = alignSlot(cur)
			if l.tail > 0 && cur%disk.BlockSize+size > disk.BlockSize {
				next := (cur + disk.BlockSize - 1) &^ (disk.BlockSize - 1)
				gaps = addGap(gaps, gap{cur, next})
				cur = next
			}
			off = cur
			cur += size
		}
		l.nid = uint64(off >> disk.SlotBits)
	}
	if p.inodes[0].l.nid > 0xffff {
		panic("erofs: root nid beyond 16 bits") // the root is laid out first
	}
	metaBlocks := (cur + disk.BlockSize - 1) / disk.BlockSize
	next := metaBlocks
	if p.xattrLen > 0 {
		p.xattrBlk = uint32(next)
		next += (p.xattrLen + disk.BlockSize - 1) / disk.BlockSize
	}
	p.metaBlocks = uint32(metaBlocks)

	// Data blocks, in nid order.
	for _, n := range p.inodes {
		l := &n.l
		l.nblocks = (l.size - int64(l.tail) + disk.BlockSize - 1) / disk.BlockSize
		if l.nblocks > 0 {
			l.blkaddr = uint32(next)
			next += l.nblocks
		}
		if next > int64(^uint32(0)) {
			return nil, fmt.Errorf("%w: more than 2^32 blocks", ErrNoSpace)
		}
	}
	p.blocks = uint32(next)
	return p, nil
}
