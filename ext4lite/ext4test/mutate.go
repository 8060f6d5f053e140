// Package ext4test holds helpers for tests and fuzz harnesses outside
// package ext4lite (the top-level fuzz package): structure-aware mutators
// of ext4 image bytes. Each changes one field of one on-disk structure and
// then rewrites the checksums that cover it, so the change reaches the
// parser behind the checksum instead of stopping at it.
//
// The mutators trust the image only as far as they must to find a
// structure; on an image they cannot follow they do nothing and say so
// (false), never panic. They are not a second decoder: ext4lite reads
// images through ext4lite/internal/disk, and so do these.
package ext4test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// Image is an ext4 image in memory, mutated in place.
type Image struct {
	b    []byte
	sb   *disk.Superblock
	bs   int
	ds   int // group descriptor size in use
	csum bool
	seed uint32
}

// Parse wraps b (not copied) after checking the superblock is readable.
func Parse(b []byte) (*Image, error) {
	if len(b) < disk.SuperblockOffset+disk.SuperblockSize {
		return nil, errors.New("ext4test: image too short for a superblock")
	}
	sb, err := disk.DecodeSuperblock(b[disk.SuperblockOffset:])
	if err != nil {
		return nil, err
	}
	if sb.Magic != disk.Magic || sb.LogBlockSize > 6 || sb.InodesPerGroup == 0 || sb.InodeSize < 128 {
		return nil, errors.New("ext4test: not an ext4 superblock this package can follow")
	}
	im := &Image{b: b, sb: sb, bs: sb.BlockSize(), ds: disk.GroupDescSize32,
		csum: sb.FeatureROCompat&disk.ROCompatMetadataCsum != 0}
	if sb.FeatureIncompat&disk.Incompat64bit != 0 && sb.DescSize >= disk.GroupDescSize64 {
		im.ds = int(sb.DescSize)
	}
	im.seed = disk.CRC32c(^uint32(0), sb.UUID[:])
	if sb.FeatureIncompat&disk.IncompatCsumSeed != 0 {
		im.seed = sb.ChecksumSeed
	}
	return im, nil
}

// Bytes returns the image.
func (im *Image) Bytes() []byte { return im.b }

func (im *Image) span(off, n int) []byte {
	if off < 0 || n < 0 || off > len(im.b)-n {
		return nil
	}
	return im.b[off : off+n]
}

func (im *Image) gdOff(g uint32) int {
	return (int(im.sb.FirstDataBlock)+1)*im.bs + int(g)*im.ds
}

// inodeSlot returns ino's bytes in the inode table, nil if out of reach.
func (im *Image) inodeSlot(ino uint32) []byte {
	if ino == 0 || ino > im.sb.InodesCount {
		return nil
	}
	g, i := (ino-1)/im.sb.InodesPerGroup, (ino-1)%im.sb.InodesPerGroup
	raw := im.span(im.gdOff(g), im.ds)
	if raw == nil {
		return nil
	}
	gd := disk.DecodeGroupDesc(raw, im.ds)
	off := uint64(gd.InodeTable())*uint64(im.bs) + uint64(i)*uint64(im.sb.InodeSize)
	if off > uint64(len(im.b)) {
		return nil
	}
	return im.span(int(off), int(im.sb.InodeSize))
}

// Inode decodes ino, nil if out of reach.
func (im *Image) inode(ino uint32) *disk.Inode {
	s := im.inodeSlot(ino)
	if s == nil {
		return nil
	}
	return disk.DecodeInode(s)
}

func (im *Image) putInode(ino uint32, in *disk.Inode) {
	s := im.inodeSlot(ino)
	in.EncodeInto(s)
	if im.csum {
		disk.SetInodeChecksum(im.seed, ino, s)
	}
}

// InUse returns the inodes with links, in order (at most max).
func (im *Image) InUse(max int) []uint32 {
	var out []uint32
	for ino := uint32(1); ino <= im.sb.InodesCount && len(out) < max; ino++ {
		if in := im.inode(ino); in != nil && in.LinksCount > 0 {
			out = append(out, ino)
		}
	}
	return out
}

// IndexEntry is one index entry (struct ext4_extent_idx) in an inode's
// i_block: the tree's root of depth ≥ 1.
type IndexEntry struct {
	Ino  uint32
	Slot int    // entry number in i_block
	Leaf uint64 // ei_leaf: the tree block it points at
}

// IndexEntries lists the root index entries of every in-use inode whose
// extent tree is deeper than the inode.
func (im *Image) IndexEntries() []IndexEntry {
	var out []IndexEntry
	for _, ino := range im.InUse(1 << 16) {
		in := im.inode(ino)
		if in.Flags&disk.FlagExtents == 0 {
			continue
		}
		h := disk.DecodeExtentHeader(in.Block[:])
		if h.Magic != disk.ExtentMagic || h.Depth == 0 {
			continue
		}
		for s := 0; s < int(min(h.Entries, disk.ExtentsInInode)); s++ {
			e := disk.DecodeExtentIdx(in.Block[disk.ExtentHeaderSize+s*disk.ExtentEntrySize:])
			out = append(out, IndexEntry{Ino: ino, Slot: s, Leaf: e.Leaf})
		}
	}
	return out
}

// RepointIndex points index entry e at tree block leaf (another file's
// tree block, the same one twice: what makes a walker loop or share).
func (im *Image) RepointIndex(e IndexEntry, leaf uint64) bool {
	in := im.inode(e.Ino)
	if in == nil {
		return false
	}
	off := disk.ExtentHeaderSize + e.Slot*disk.ExtentEntrySize
	if off+disk.ExtentEntrySize > len(in.Block) {
		return false
	}
	binary.LittleEndian.PutUint32(in.Block[off+4:], uint32(leaf))
	binary.LittleEndian.PutUint16(in.Block[off+8:], uint16(leaf>>32))
	im.putInode(e.Ino, in)
	return true
}

// SetSizeHigh sets ino's i_size_high.
func (im *Image) SetSizeHigh(ino uint32, v uint32) bool {
	in := im.inode(ino)
	if in == nil {
		return false
	}
	in.SizeHigh = v
	im.putInode(ino, in)
	return true
}

// SetDescSize sets s_desc_size (the primary superblock only).
func (im *Image) SetDescSize(v uint16) bool {
	raw := im.span(disk.SuperblockOffset, disk.SuperblockSize)
	binary.LittleEndian.PutUint16(raw[0xFE:], v)
	if im.csum {
		binary.LittleEndian.PutUint32(raw[disk.SuperblockSize-4:], disk.SuperblockChecksum(raw))
	}
	return true
}

// jbd2 on-disk constants (big-endian), as in the kernel's jbd2.h.
const (
	jMagic          = 0xC03B3998
	jDescriptor     = 1
	jIncompat64     = 0x2
	jIncompatCsumV2 = 0x8
	jIncompatCsumV3 = 0x10
	jFlagSameUUID   = 0x2
	jFlagLastTag    = 0x8
)

// JournalTag is one block tag of a descriptor block in the journal.
type JournalTag struct {
	Block int // journal block holding the descriptor
	Off   int // byte offset of the tag in it
}

type journal struct {
	blocks   []uint64 // fs block of each journal block
	incompat uint32
	seed     uint32
}

// journal maps the journal inode's in-inode extents (depth 0, as mkfs.ext4
// and ext4lite lay it out) and reads its superblock.
func (im *Image) journal() *journal {
	if im.sb.FeatureCompat&disk.CompatHasJournal == 0 {
		return nil
	}
	in := im.inode(im.sb.JournalInum)
	if in == nil {
		return nil
	}
	h := disk.DecodeExtentHeader(in.Block[:])
	if h.Magic != disk.ExtentMagic || h.Depth != 0 {
		return nil
	}
	j := &journal{}
	for s := 0; s < int(min(h.Entries, disk.ExtentsInInode)); s++ {
		e := disk.DecodeExtent(in.Block[disk.ExtentHeaderSize+s*disk.ExtentEntrySize:])
		for k := uint64(0); k < uint64(e.Len) && len(j.blocks) < 1<<20; k++ {
			j.blocks = append(j.blocks, e.Start+k)
		}
	}
	sb := im.jblock(j, 0)
	if sb == nil || binary.BigEndian.Uint32(sb) != jMagic {
		return nil
	}
	j.incompat = binary.BigEndian.Uint32(sb[0x28:])
	j.seed = crc32.Update(^uint32(0), crc32.MakeTable(crc32.Castagnoli), sb[0x30:0x40])
	return j
}

func (im *Image) jblock(j *journal, n int) []byte {
	if n < 0 || n >= len(j.blocks) || j.blocks[n] > uint64(len(im.b)/im.bs) {
		return nil
	}
	return im.span(int(j.blocks[n])*im.bs, im.bs)
}

func (j *journal) tagSize() int {
	switch {
	case j.incompat&jIncompatCsumV3 != 0:
		return 16
	case j.incompat&jIncompatCsumV2 != 0:
		if j.incompat&jIncompat64 != 0 {
			return 14
		}
		return 10
	case j.incompat&jIncompat64 != 0:
		return 12
	}
	return 8
}

// JournalTags lists the block tags of every descriptor block in the
// journal (committed or stale: a mutator need not know which).
func (im *Image) JournalTags() []JournalTag {
	j := im.journal()
	if j == nil {
		return nil
	}
	var out []JournalTag
	ts := j.tagSize()
	tail := 0
	if j.incompat&(jIncompatCsumV2|jIncompatCsumV3) != 0 {
		tail = 4
	}
	for n := 1; n < len(j.blocks); n++ {
		b := im.jblock(j, n)
		if b == nil || binary.BigEndian.Uint32(b) != jMagic || binary.BigEndian.Uint32(b[4:]) != jDescriptor {
			continue
		}
		for off := 12; off+ts <= im.bs-tail; {
			out = append(out, JournalTag{Block: n, Off: off})
			flags := im.tagFlags(j, b[off:])
			off += ts
			if flags&jFlagSameUUID == 0 {
				off += 16
			}
			if flags&jFlagLastTag != 0 {
				break
			}
		}
	}
	return out
}

func (im *Image) tagFlags(j *journal, tag []byte) uint32 {
	if j.incompat&jIncompatCsumV3 != 0 {
		return binary.BigEndian.Uint32(tag[4:])
	}
	return uint32(binary.BigEndian.Uint16(tag[6:]))
}

// SetJournalTag rewrites tag t's home block number (both halves where the
// tag has them) and XORs its flags with flip, then re-signs the descriptor
// block (checksum v2/v3), so replay meets the new tag, not a bad checksum.
func (im *Image) SetJournalTag(t JournalTag, home uint64, flip uint32) bool {
	j := im.journal()
	if j == nil {
		return false
	}
	b := im.jblock(j, t.Block)
	ts := j.tagSize()
	if b == nil || t.Off < 12 || t.Off+ts > len(b) {
		return false
	}
	tag := b[t.Off:]
	binary.BigEndian.PutUint32(tag, uint32(home))
	if j.incompat&jIncompatCsumV3 != 0 {
		binary.BigEndian.PutUint32(tag[4:], binary.BigEndian.Uint32(tag[4:])^flip)
		binary.BigEndian.PutUint32(tag[8:], uint32(home>>32))
	} else {
		binary.BigEndian.PutUint16(tag[6:], binary.BigEndian.Uint16(tag[6:])^uint16(flip))
		if j.incompat&jIncompat64 != 0 {
			binary.BigEndian.PutUint32(tag[8:], uint32(home>>32))
		}
	}
	if j.incompat&(jIncompatCsumV2|jIncompatCsumV3) != 0 {
		tail := b[len(b)-4:]
		clear(tail)
		binary.BigEndian.PutUint32(tail, crc32.Update(j.seed, crc32.MakeTable(crc32.Castagnoli), b))
	}
	return true
}

// MemDevice is an ext4lite.Device in memory: a fixed-size byte slice
// (writes past its end fail, as on a file that cannot grow).
type MemDevice []byte

// ReadAt implements io.ReaderAt.
func (m MemDevice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, os.ErrInvalid
	}
	if off >= int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements io.WriterAt.
func (m MemDevice) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(m))-int64(len(p)) {
		return 0, os.ErrInvalid
	}
	return copy(m[off:], p), nil
}

// BlockSize returns the filesystem block size.
func (im *Image) BlockSize() int { return im.bs }

// BlocksCount returns s_blocks_count.
func (im *Image) BlocksCount() uint64 { return im.sb.BlocksCount() }

// JournalBlocks returns the filesystem block of each journal block (nil
// without an internal journal this package can map).
func (im *Image) JournalBlocks() []uint64 {
	if j := im.journal(); j != nil {
		return j.blocks
	}
	return nil
}
