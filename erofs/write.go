package erofs

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/sink"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// superChecksum is the kernel's crc32c(~0, block from offset 1024) with
// the checksum field zeroed, as erofs_superblock_csum_verify computes it.
func superChecksum(block []byte) uint32 {
	var zero [4]byte
	crc := crc32.Update(0, castagnoli, block[disk.SuperOffset:disk.SuperOffset+4])
	crc = crc32.Update(crc, castagnoli, zero[:]) // the checksum field itself
	crc = crc32.Update(crc, castagnoli, block[disk.SuperOffset+8:disk.BlockSize])
	return ^crc
}

// holeWriter is the image's output: buffered, and where the output can
// seek (a file), whole zero blocks of sparse files are seeked over rather
// than written, so the image file is sparse too and writing it costs the
// data, not the apparent size.
type holeWriter struct {
	cw   *countWriter
	bw   *bufio.Writer
	seek io.Seeker // nil: zeros are written
	hole int64     // zeros owed before the next byte
}

var zeroChunk [64 << 10]byte

func (h *holeWriter) Write(p []byte) (int, error) {
	if err := h.fill(false); err != nil {
		return 0, err
	}
	return h.bw.Write(p)
}

// ReadFrom keeps bufio's copy without an extra buffer.
func (h *holeWriter) ReadFrom(r io.Reader) (int64, error) {
	if err := h.fill(false); err != nil {
		return 0, err
	}
	return h.bw.ReadFrom(r)
}

// zeros adds n zero bytes.
func (h *holeWriter) zeros(n int64) error {
	if h.seek == nil {
		for n > 0 {
			k := min(n, int64(len(zeroChunk)))
			if _, err := h.bw.Write(zeroChunk[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	h.hole += n
	return nil
}

// fill moves past the owed zeros: a seek, and at the end of the image one
// written zero byte so the file has its full size.
func (h *holeWriter) fill(last bool) error {
	if h.hole == 0 {
		return nil
	}
	if err := h.bw.Flush(); err != nil {
		return err
	}
	skip := h.hole
	if last {
		skip--
	}
	if _, err := h.seek.Seek(skip, io.SeekCurrent); err != nil {
		return fmt.Errorf("erofs: seeking over a hole: %w", err)
	}
	h.cw.n += skip
	h.hole = 0
	if last {
		_, err := h.bw.Write(zeroChunk[:1])
		return err
	}
	return nil
}

// Flush writes what is buffered and owed.
func (h *holeWriter) Flush() error {
	if err := h.fill(true); err != nil {
		return err
	}
	return h.bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteTo writes the image to w and returns its size. The same tree and
// options always give the same bytes, whatever Options.Workers is. The
// builder stays usable (more sink calls, another WriteTo).
//
// To a regular *os.File (not opened O_APPEND), the image goes at the
// file's offset, and file
// data is written by Options.Workers goroutines with pwrite and
// copy_file_range (no copy through user space where the kernel can avoid
// it); the file is cut at the image's end and its offset left there.
// Any other writer gets one sequential stream.
func (b *Builder) WriteTo(w io.Writer) (int64, error) { return b.writeTo(w, false) }

// writeTo is WriteTo; with writeback, the caller fsyncs the file next
// (Finish), and the parallel writer starts the writeback of each unit of
// work as it is done, so that the disk writes while the rest is built
// rather than all at the fsync.
func (b *Builder) writeTo(w io.Writer, writeback bool) (int64, error) {
	if b.closed {
		return 0, errBuilderClosed
	}
	p, err := b.plan()
	if err != nil {
		return 0, err
	}
	if f, ok := w.(*os.File); ok && canWriteAt(f) {
		if base, err := f.Seek(0, io.SeekCurrent); err == nil {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				return b.writeAt(f, base, p, writeback)
			}
		}
	}
	meta, err := b.encodeMeta(p, true)
	if err != nil {
		return 0, err
	}
	return b.stream(w, p, meta)
}

// encodeMeta encodes the metadata blocks: inodes with their xattrs and
// inline tails (regular files' only with tails set) and, with tails set,
// the superblock, whose checksum covers block 0's inodes.
func (b *Builder) encodeMeta(p *plan, tails bool) ([]byte, error) {
	meta := make([]byte, int64(p.metaBlocks)*disk.BlockSize)
	// Inodes own disjoint bytes of meta: the workers encode them.
	var mu sync.Mutex
	var first error
	parallelFor(len(p.inodes), b.workers(), func(i int) {
		if err := b.putInode(meta, p, p.inodes[i], tails); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	if first != nil {
		return nil, first
	}
	if tails {
		b.putSuper(meta, p)
	}
	return meta, nil
}

// putSuper encodes the superblock into block 0, checksum last.
func (b *Builder) putSuper(meta []byte, p *plan) {
	sb := disk.Super{
		Magic:         disk.SuperMagicV1,
		FeatureCompat: uint32(disk.CompatSBChksum),
		BlkSzBits:     disk.BlockBits,
		RootNid:       uint16(p.inodes[0].l.nid),
		Inos:          uint64(len(p.inodes)),
		Epoch:         uint64(p.epoch.Unix()),
		FixedNsec:     uint32(p.epoch.Nanosecond()),
		BlocksLo:      p.blocks,
		XattrBlkAddr:  p.xattrBlk,
		UUID:          b.opts.UUID,
	}
	copy(sb.VolumeName[:], b.opts.VolumeName)
	sb.Marshal(meta[disk.SuperOffset:])
	sb.Checksum = superChecksum(meta[:disk.BlockSize])
	sb.Marshal(meta[disk.SuperOffset:])
}

// xattrArea encodes the shared xattr area, whole blocks (nil if none).
func xattrArea(p *plan) []byte {
	if p.xattrLen == 0 {
		return nil
	}
	area := make([]byte, (p.xattrLen+disk.BlockSize-1)&^(disk.BlockSize-1))
	off := 0
	for i := range p.shared {
		off += putXattrEntry(area[off:], &p.shared[i])
	}
	return area
}

// finishReport records the written image's geometry.
func (b *Builder) finishReport(p *plan, n int64) {
	b.report.Inodes = int64(len(p.inodes))
	b.report.Blocks = int64(p.blocks)
	b.report.Bytes = n
	if n != int64(p.blocks)*disk.BlockSize {
		panic(fmt.Sprintf("erofs: wrote %d bytes for %d blocks", n, p.blocks))
	}
}

// stream writes the image to w sequentially.
func (b *Builder) stream(w io.Writer, p *plan, meta []byte) (int64, error) {
	cw := &countWriter{w: w}
	bw := &holeWriter{cw: cw, bw: bufio.NewWriterSize(cw, 1<<20)}
	if s, ok := w.(io.Seeker); ok {
		bw.seek = s
	}
	if _, err := bw.Write(meta); err != nil {
		return cw.n, err
	}
	if area := xattrArea(p); area != nil {
		if _, err := bw.Write(area); err != nil {
			return cw.n, err
		}
	}
	block := make([]byte, disk.BlockSize)
	for _, n := range p.inodes {
		l := &n.l
		if l.nblocks == 0 {
			continue
		}
		switch n.mode & sink.TypeMask {
		case sink.TypeDir:
			for _, ents := range l.dir[:l.nblocks] {
				clear(block)
				putDirBlock(block, ents)
				if _, err := bw.Write(block); err != nil {
					return cw.n, err
				}
			}
		case sink.TypeSymlink:
			clear(block)
			copy(block, n.link)
			if _, err := bw.Write(block); err != nil {
				return cw.n, err
			}
		case sink.TypeReg:
			if err := b.streamFile(bw, n); err != nil {
				return cw.n, err
			}
			if pad := l.nblocks*disk.BlockSize - (n.size - int64(l.tail)); pad > 0 {
				clear(block)
				if _, err := bw.Write(block[:pad]); err != nil {
					return cw.n, err
				}
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	b.finishReport(p, cw.n)
	return cw.n, nil
}

// streamFile writes a regular file's block data (not its tail).
func (b *Builder) streamFile(bw *holeWriter, n *inode) error {
	m := n.size - int64(n.l.tail)
	c, err := b.content(n)
	if err != nil {
		return err
	}
	defer c.close()
	var at int64
	for _, s := range c.dataSpans(m, disk.BlockSize) {
		if err := bw.zeros(s.Off - at); err != nil {
			return err
		}
		k, err := io.Copy(bw, io.NewSectionReader(c, s.Off, s.Len))
		if err == nil && k < s.Len {
			err = c.shrank()
		}
		if err != nil {
			return fmt.Errorf("erofs: reading file data: %w", err)
		}
		at = s.Off + s.Len
	}
	return bw.zeros(m - at)
}

// tailOff is where n's inline tail goes in the metadata.
func tailOff(n *inode) int64 {
	isize := int64(disk.InodeCompactSize)
	if n.l.extended {
		isize = disk.InodeExtendedSize
	}
	return int64(n.l.nid)<<disk.SlotBits + isize + int64(n.l.xsize)
}

// putInode encodes n's inode, xattr ibody and inline tail into meta; a
// regular file's tail only with regTail set.
func (b *Builder) putInode(meta []byte, p *plan, n *inode, regTail bool) error {
	l := &n.l
	off := int64(l.nid) << disk.SlotBits
	layoutBits := uint16(disk.FlatPlain)
	if l.tail > 0 {
		layoutBits = disk.FlatInline
	}
	icount := uint16(0)
	if l.xsize > 0 {
		icount = uint16((l.xsize-disk.XattrIbodyHeaderSize)/4 + 1)
	}
	u := l.blkaddr
	if t := n.mode & sink.TypeMask; t == sink.TypeChar || t == sink.TypeBlock {
		u = n.rdev
	}
	isize := int64(disk.InodeCompactSize)
	if l.extended {
		isize = disk.InodeExtendedSize
		ie := disk.InodeExtended{
			Format:      disk.LayoutExtended | layoutBits<<disk.FormatDataLayoutBit,
			XattrIcount: icount,
			Mode:        uint16(n.mode),
			Size:        uint64(l.size),
			U:           u,
			Ino:         l.ino,
			UID:         n.uid,
			GID:         n.gid,
			Mtime:       uint64(n.mtime.Unix()),
			MtimeNsec:   uint32(n.mtime.Nanosecond()),
			Nlink:       l.nlink,
		}
		ie.Marshal(meta[off:])
	} else {
		ic := disk.InodeCompact{
			Format:      disk.LayoutCompact | layoutBits<<disk.FormatDataLayoutBit,
			XattrIcount: icount,
			Mode:        uint16(n.mode),
			Nlink:       uint16(l.nlink),
			Size:        uint32(l.size),
			U:           u,
			Ino:         l.ino,
			UID:         uint16(n.uid),
			GID:         uint16(n.gid),
		}
		ic.Marshal(meta[off:])
	}
	x := meta[off+isize:]
	if l.xsize > 0 {
		h := disk.XattrIbodyHeader{SharedCount: uint8(len(l.shared))}
		h.Marshal(x)
		o := disk.XattrIbodyHeaderSize
		for _, id := range l.shared {
			le32(x[o:], id)
			o += 4
		}
		for i := range l.inline {
			o += putXattrEntry(x[o:], &l.inline[i])
		}
	}
	if l.tail == 0 {
		return nil
	}
	t := x[l.xsize : l.xsize+l.tail]
	switch n.mode & sink.TypeMask {
	case sink.TypeReg:
		if regTail {
			return b.readTail(t, n)
		}
	case sink.TypeSymlink:
		copy(t, n.link[len(n.link)-l.tail:])
	case sink.TypeDir:
		var block [disk.BlockSize]byte
		putDirBlock(block[:], l.dir[len(l.dir)-1])
		copy(t, block[:])
	}
	return nil
}

// readTail reads a regular file's last l.tail bytes into t.
func (b *Builder) readTail(t []byte, n *inode) error {
	c, err := b.content(n)
	if err != nil {
		return err
	}
	defer c.close()
	return readFull(c, t, n.size-int64(len(t)))
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

// putXattrEntry encodes x at the start of b and returns its aligned size.
func putXattrEntry(b []byte, x *xattrKV) int {
	e := disk.XattrEntry{NameLen: uint8(len(x.sfx)), NameIndex: x.index, ValueSize: uint16(len(x.value))}
	e.Marshal(b)
	o := disk.XattrEntrySize
	o += copy(b[o:], x.sfx)
	copy(b[o:], x.value)
	return x.entryLen()
}

// putDirBlock encodes one directory block: dirents, then names.
func putDirBlock(block []byte, ents []dirent) {
	nameOff := len(ents) * disk.DirentSize
	for i, e := range ents {
		d := disk.Dirent{Nid: e.n.l.nid, NameOff: uint16(nameOff), FileType: fileType(e.n.mode)}
		d.Marshal(block[i*disk.DirentSize:])
		nameOff += copy(block[nameOff:], e.name)
	}
}
