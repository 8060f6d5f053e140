package erofs

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

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

// WriteTo writes the image to w as one sequential stream and returns its
// size. The same tree and options always give the same bytes. The builder
// stays usable (more sink calls, another WriteTo).
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	if b.closed {
		return 0, errors.New("erofs: builder is closed")
	}
	p, err := b.plan()
	if err != nil {
		return 0, err
	}
	meta := make([]byte, int64(p.metaBlocks)*disk.BlockSize)
	for _, n := range p.inodes {
		if err := b.putInode(meta, p, n); err != nil {
			return 0, err
		}
	}
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

	cw := &countWriter{w: w}
	bw := &holeWriter{cw: cw, bw: bufio.NewWriterSize(cw, 1<<20)}
	if s, ok := w.(io.Seeker); ok {
		bw.seek = s
	}
	if _, err := bw.Write(meta); err != nil {
		return cw.n, err
	}
	if p.xattrLen > 0 {
		area := make([]byte, (p.xattrLen+disk.BlockSize-1)&^(disk.BlockSize-1))
		off := 0
		for i := range p.shared {
			off += putXattrEntry(area[off:], &p.shared[i])
		}
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
			m := n.size - int64(l.tail)
			c := b.content(n)
			var at int64
			for _, s := range c.dataSpans(m, disk.BlockSize) {
				if err := bw.zeros(s.Off - at); err != nil {
					return cw.n, err
				}
				if _, err := io.Copy(bw, io.NewSectionReader(c, s.Off, s.Len)); err != nil {
					return cw.n, fmt.Errorf("erofs: reading spooled data: %w", err)
				}
				at = s.Off + s.Len
			}
			if err := bw.zeros(m - at); err != nil {
				return cw.n, err
			}
			if pad := l.nblocks*disk.BlockSize - m; pad > 0 {
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
	b.report.Inodes = int64(len(p.inodes))
	b.report.Blocks = int64(p.blocks)
	b.report.Bytes = cw.n
	if cw.n != int64(p.blocks)*disk.BlockSize {
		panic(fmt.Sprintf("erofs: wrote %d bytes for %d blocks", cw.n, p.blocks))
	}
	return cw.n, nil
}

// putInode encodes n's inode, xattr ibody and inline tail into meta.
func (b *Builder) putInode(meta []byte, p *plan, n *inode) error {
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
		if _, err := b.content(n).ReadAt(t, n.size-int64(l.tail)); err != nil && err != io.EOF {
			return fmt.Errorf("erofs: reading spooled data: %w", err)
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
