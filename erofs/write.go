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
	bw := bufio.NewWriterSize(cw, 1<<20)
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
			if _, err := io.Copy(bw, io.NewSectionReader(&b.spool, n.dataOff, m)); err != nil {
				return cw.n, fmt.Errorf("erofs: reading spooled data: %w", err)
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
		if _, err := b.spool.ReadAt(t, n.dataOff+n.size-int64(l.tail)); err != nil && err != io.EOF {
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
