package disk

// Tag3 is journal_block_tag3_t, the descriptor tag of checksum v3 journals.
type Tag3 struct {
	BlockNr     uint32 // t_blocknr
	Flags       uint32 // t_flags
	BlockNrHigh uint32 // t_blocknr_high
	Checksum    uint32 // t_checksum: crc32c(seed, be32 sequence, block as logged)
}

// Tag is journal_block_tag_t, the descriptor tag of journals without
// checksum v3. Without the 64bit feature its last field is absent.
type Tag struct {
	BlockNr     uint32 // t_blocknr
	Checksum    uint16 // t_checksum: low 16 bits of the v2 checksum
	Flags       uint16 // t_flags
	BlockNrHigh uint32 // t_blocknr_high
}

// Marshal writes t into p[:Tag3Size].
func (t *Tag3) Marshal(p []byte) {
	_ = p[Tag3Size-1]
	be.PutUint32(p[0:], t.BlockNr)
	be.PutUint32(p[4:], t.Flags)
	be.PutUint32(p[8:], t.BlockNrHigh)
	be.PutUint32(p[12:], t.Checksum)
}

// Unmarshal reads t from p[:Tag3Size].
func (t *Tag3) Unmarshal(p []byte) {
	_ = p[Tag3Size-1]
	t.BlockNr = be.Uint32(p[0:])
	t.Flags = be.Uint32(p[4:])
	t.BlockNrHigh = be.Uint32(p[8:])
	t.Checksum = be.Uint32(p[12:])
}

// Marshal writes t into p[:TagSize].
func (t *Tag) Marshal(p []byte) {
	_ = p[TagSize-1]
	be.PutUint32(p[0:], t.BlockNr)
	be.PutUint16(p[4:], t.Checksum)
	be.PutUint16(p[6:], t.Flags)
	be.PutUint32(p[8:], t.BlockNrHigh)
}

// Unmarshal reads t from p[:TagSize].
func (t *Tag) Unmarshal(p []byte) {
	_ = p[TagSize-1]
	t.BlockNr = be.Uint32(p[0:])
	t.Checksum = be.Uint16(p[4:])
	t.Flags = be.Uint16(p[6:])
	t.BlockNrHigh = be.Uint32(p[8:])
}

// TagBytes is journal_tag_bytes: the size of one tag (without the UUID that
// follows a tag lacking FlagSameUUID) for a journal with these features.
// Checksum v2 adds two bytes nobody reads, as the kernel does.
func TagBytes(f IncompatFeature) int {
	if f&IncompatCsumV3 != 0 {
		return Tag3Size
	}
	sz := TagSize
	if f&IncompatCsumV2 != 0 {
		sz += 2
	}
	if f&Incompat64Bit != 0 {
		return sz
	}
	return sz - 4
}

// BlockTag is a decoded descriptor tag, whatever its on-disk form.
type BlockTag struct {
	Block    uint64 // filesystem block number
	Flags    uint32 // Flag* bits
	Checksum uint32 // v3: 32 bits; v2: 16 bits; otherwise 0
}

// PutTag encodes t at the start of p (at least TagBytes(f) bytes).
func PutTag(p []byte, f IncompatFeature, t BlockTag) {
	n := TagBytes(f)
	_ = p[n-1]
	if f&IncompatCsumV3 != 0 {
		t3 := Tag3{BlockNr: uint32(t.Block), Flags: t.Flags, Checksum: t.Checksum}
		if f&Incompat64Bit != 0 {
			t3.BlockNrHigh = uint32(t.Block >> 32)
		}
		t3.Marshal(p)
		return
	}
	be.PutUint32(p[0:], uint32(t.Block))
	be.PutUint16(p[4:], uint16(t.Checksum))
	be.PutUint16(p[6:], uint16(t.Flags))
	if f&Incompat64Bit != 0 {
		be.PutUint32(p[8:], uint32(t.Block>>32))
	}
	clear(p[8+4*b2i(f&Incompat64Bit != 0) : n])
}

// GetTag decodes the tag at the start of p (at least TagBytes(f) bytes).
// t_blocknr_high is part of the block number only with the 64bit feature
// (read_tag_block in fs/jbd2/recovery.c): a checksum v3 tag always has the
// field, and without 64bit it holds nothing the reader may use.
func GetTag(p []byte, f IncompatFeature) BlockTag {
	_ = p[TagBytes(f)-1]
	if f&IncompatCsumV3 != 0 {
		var t Tag3
		t.Unmarshal(p)
		bt := BlockTag{Block: uint64(t.BlockNr), Flags: t.Flags, Checksum: t.Checksum}
		if f&Incompat64Bit != 0 {
			bt.Block |= uint64(t.BlockNrHigh) << 32
		}
		return bt
	}
	t := BlockTag{Block: uint64(be.Uint32(p[0:])), Checksum: uint32(be.Uint16(p[4:])), Flags: uint32(be.Uint16(p[6:]))}
	if f&Incompat64Bit != 0 {
		t.Block |= uint64(be.Uint32(p[8:])) << 32
	}
	return t
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BlockTagChecksum is the data block checksum of checksum v2/v3 tags:
// crc32c(seed, be32(sequence) ‖ block as written in the journal). v2 tags
// keep its low 16 bits.
func BlockTagChecksum(seed, sequence uint32, block []byte) uint32 {
	var s [4]byte
	be.PutUint32(s[:], sequence)
	return CRC32C(CRC32C(seed, s[:]), block)
}
