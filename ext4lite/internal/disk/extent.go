package disk

import "encoding/binary"

// Extent tree constants.
const (
	ExtentMagic      = 0xF30A
	ExtentHeaderSize = 12
	ExtentEntrySize  = 12
	ExtentTailSize   = 4
	ExtentInitMaxLen = 32768 // EXT_INIT_MAX_LEN
	ExtentUninitMax  = 32767 // EXT_UNWRITTEN_MAX_LEN
	ExtentMaxDepth   = 5     // EXT4_MAX_EXTENT_DEPTH
	ExtentsInInode   = 4     // (60 - 12) / 12
)

// ExtentHeader is struct ext4_extent_header.
type ExtentHeader struct {
	Magic      uint16 // eh_magic
	Entries    uint16 // eh_entries
	Max        uint16 // eh_max
	Depth      uint16 // eh_depth
	Generation uint32 // eh_generation
}

// DecodeExtentHeader parses 12 bytes.
func DecodeExtentHeader(b []byte) ExtentHeader {
	return ExtentHeader{
		Magic:      binary.LittleEndian.Uint16(b[0:]),
		Entries:    binary.LittleEndian.Uint16(b[2:]),
		Max:        binary.LittleEndian.Uint16(b[4:]),
		Depth:      binary.LittleEndian.Uint16(b[6:]),
		Generation: binary.LittleEndian.Uint32(b[8:]),
	}
}

// EncodeInto writes 12 bytes.
func (h ExtentHeader) EncodeInto(b []byte) {
	binary.LittleEndian.PutUint16(b[0:], h.Magic)
	binary.LittleEndian.PutUint16(b[2:], h.Entries)
	binary.LittleEndian.PutUint16(b[4:], h.Max)
	binary.LittleEndian.PutUint16(b[6:], h.Depth)
	binary.LittleEndian.PutUint32(b[8:], h.Generation)
}

// Extent is struct ext4_extent (a leaf entry), decoded: Len is the real
// length and Uninit tells whether the extent is unwritten (reads as zeros).
type Extent struct {
	Block  uint32 // ee_block: first logical block
	Len    uint16 // decoded ee_len
	Start  uint64 // ee_start_hi:ee_start_lo: first physical block
	Uninit bool
}

// DecodeExtent parses 12 bytes.
func DecodeExtent(b []byte) Extent {
	e := Extent{
		Block: binary.LittleEndian.Uint32(b[0:]),
		Len:   binary.LittleEndian.Uint16(b[4:]),
		Start: uint64(binary.LittleEndian.Uint16(b[6:]))<<32 | uint64(binary.LittleEndian.Uint32(b[8:])),
	}
	if e.Len > ExtentInitMaxLen {
		e.Len -= ExtentInitMaxLen
		e.Uninit = true
	}
	return e
}

// EncodeInto writes 12 bytes.
func (e Extent) EncodeInto(b []byte) {
	l := e.Len
	if e.Uninit {
		l += ExtentInitMaxLen
	}
	binary.LittleEndian.PutUint32(b[0:], e.Block)
	binary.LittleEndian.PutUint16(b[4:], l)
	binary.LittleEndian.PutUint16(b[6:], uint16(e.Start>>32))
	binary.LittleEndian.PutUint32(b[8:], uint32(e.Start))
}

// ExtentIdx is struct ext4_extent_idx (an interior entry).
type ExtentIdx struct {
	Block uint32 // ei_block: first logical block covered
	Leaf  uint64 // ei_leaf_hi:ei_leaf_lo: physical block of the child
}

// DecodeExtentIdx parses 12 bytes.
func DecodeExtentIdx(b []byte) ExtentIdx {
	return ExtentIdx{
		Block: binary.LittleEndian.Uint32(b[0:]),
		Leaf:  uint64(binary.LittleEndian.Uint16(b[8:]))<<32 | uint64(binary.LittleEndian.Uint32(b[4:])),
	}
}

// EncodeInto writes 12 bytes.
func (x ExtentIdx) EncodeInto(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], x.Block)
	binary.LittleEndian.PutUint32(b[4:], uint32(x.Leaf))
	binary.LittleEndian.PutUint16(b[8:], uint16(x.Leaf>>32))
	binary.LittleEndian.PutUint16(b[10:], 0)
}

// ExtentBlockMax is eh_max for an extent tree block of blockSize bytes.
func ExtentBlockMax(blockSize int) int {
	return (blockSize - ExtentHeaderSize) / ExtentEntrySize
}

// ExtentTailOffset is where struct ext4_extent_tail sits in a tree block
// whose header says eh_max entries.
func ExtentTailOffset(max int) int { return ExtentHeaderSize + max*ExtentEntrySize }

// ExtentBlockChecksum is crc32c(inode seed) over a tree block up to its tail.
func ExtentBlockChecksum(inodeSeed uint32, b []byte, max int) uint32 {
	return CRC32c(inodeSeed, b[:ExtentTailOffset(max)])
}
