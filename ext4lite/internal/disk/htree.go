package disk

import "encoding/binary"

// Hashed-directory (htree, dx_dir) constants.
const (
	DxRootInfoOff  = 24 // struct dx_root_info after "." (12) and ".." (12)
	DxRootInfoLen  = 8
	DxRootEntries  = 32 // first dx_entry (count/limit) of the root
	DxNodeEntries  = 8  // first dx_entry of an interior node (after a fake dirent)
	DxEntrySize    = 8
	DxTailSize     = 8 // struct dx_tail
	DxMaxLevels    = 2 // indirect_levels < 2 without large_dir
	DxMaxLevelsBig = 3 // with large_dir
)

// Hash versions (dx_root_info.hash_version, s_def_hash_version).
const (
	HashLegacy          = 0
	HashHalfMD4         = 1
	HashTea             = 2
	HashLegacyUnsigned  = 3
	HashHalfMD4Unsigned = 4
	HashTeaUnsigned     = 5
	HashSiphash         = 6
)

// DxRootInfo is struct dx_root_info.
type DxRootInfo struct {
	ReservedZero   uint32
	HashVersion    uint8
	InfoLength     uint8
	IndirectLevels uint8
	UnusedFlags    uint8
}

// DecodeDxRootInfo parses the root info of a dx root block.
func DecodeDxRootInfo(block []byte) DxRootInfo {
	b := block[DxRootInfoOff:]
	return DxRootInfo{
		ReservedZero:   binary.LittleEndian.Uint32(b[0:]),
		HashVersion:    b[4],
		InfoLength:     b[5],
		IndirectLevels: b[6],
		UnusedFlags:    b[7],
	}
}

// EncodeInto writes the root info into a dx root block.
func (r DxRootInfo) EncodeInto(block []byte) {
	b := block[DxRootInfoOff:]
	binary.LittleEndian.PutUint32(b[0:], r.ReservedZero)
	b[4], b[5], b[6], b[7] = r.HashVersion, r.InfoLength, r.IndirectLevels, r.UnusedFlags
}

// DxEntry is struct dx_entry. In the first slot of a node, Hash holds
// limit (low 16 bits) and count (high 16 bits).
type DxEntry struct {
	Hash  uint32
	Block uint32 // logical block within the directory
}

// DxLimit is the number of dx_entry slots in a node whose entries start at
// off, leaving room for the checksum tail when csum is set.
func DxLimit(blockSize, off int, csum bool) int {
	n := blockSize - off
	if csum {
		n -= DxTailSize
	}
	return n / DxEntrySize
}

// DxCountLimit reads count and limit at off.
func DxCountLimit(block []byte, off int) (count, limit int) {
	return int(binary.LittleEndian.Uint16(block[off+2:])), int(binary.LittleEndian.Uint16(block[off:]))
}

// PutDxEntries writes limit, count and entries at off. entries[0].Hash is
// ignored (the slot holds count and limit).
func PutDxEntries(block []byte, off, limit int, entries []DxEntry) {
	binary.LittleEndian.PutUint16(block[off:], uint16(limit))
	binary.LittleEndian.PutUint16(block[off+2:], uint16(len(entries)))
	for i, e := range entries {
		p := block[off+i*DxEntrySize:]
		if i > 0 {
			binary.LittleEndian.PutUint32(p[0:], e.Hash)
		}
		binary.LittleEndian.PutUint32(p[4:], e.Block)
	}
}

// DxEntryAt reads entry i of the node whose entries start at off.
func DxEntryAt(block []byte, off, i int) DxEntry {
	p := block[off+i*DxEntrySize:]
	e := DxEntry{Hash: binary.LittleEndian.Uint32(p[0:]), Block: binary.LittleEndian.Uint32(p[4:])}
	if i == 0 {
		e.Hash = 0
	}
	return e
}

// PutDxTail writes struct dx_tail after the limit entries and computes its
// checksum: crc32c(inode seed) over the node up to its last used entry,
// then over the tail with a zero checksum.
func PutDxTail(block []byte, off int, inodeSeed uint32) {
	count, limit := DxCountLimit(block, off)
	t := block[off+limit*DxEntrySize:]
	binary.LittleEndian.PutUint32(t[0:], 0)
	binary.LittleEndian.PutUint32(t[4:], DxChecksum(inodeSeed, block, off, count, limit))
}

// DxChecksum computes a dx node's checksum (see PutDxTail).
func DxChecksum(inodeSeed uint32, block []byte, off, count, limit int) uint32 {
	c := CRC32c(inodeSeed, block[:off+count*DxEntrySize])
	t := block[off+limit*DxEntrySize:]
	c = CRC32c(c, t[0:4])
	return CRC32c(c, []byte{0, 0, 0, 0})
}

// StoredDxChecksum returns the checksum stored in a dx node's tail.
func StoredDxChecksum(block []byte, off, limit int) uint32 {
	return binary.LittleEndian.Uint32(block[off+limit*DxEntrySize+4:])
}
