package disk

import (
	"encoding/binary"
	"strings"
)

// Extended attribute constants.
const (
	XattrMagic          = 0xEA020000
	XattrBlockHeaderLen = 32 // struct ext4_xattr_header
	XattrIbodyHeaderLen = 4  // struct ext4_xattr_ibody_header (magic only)
	XattrEntryLen       = 16 // struct ext4_xattr_entry without the name
	XattrPad            = 4
)

// Name indexes (e_name_index) and the prefixes they stand for.
const (
	XattrIndexUser       = 1
	XattrIndexACLAccess  = 2
	XattrIndexACLDefault = 3
	XattrIndexTrusted    = 4
	XattrIndexSecurity   = 6
	XattrIndexSystem     = 7
	XattrIndexRichACL    = 8
)

var xattrPrefixes = []struct {
	index  uint8
	prefix string
}{
	// Longest first: system.posix_acl_access must win over system.
	{XattrIndexACLAccess, "system.posix_acl_access"},
	{XattrIndexACLDefault, "system.posix_acl_default"},
	{XattrIndexRichACL, "system.richacl"},
	{XattrIndexUser, "user."},
	{XattrIndexTrusted, "trusted."},
	{XattrIndexSecurity, "security."},
	{XattrIndexSystem, "system."},
}

// XattrSplitName maps a full name to (index, suffix). ok is false for a
// name whose namespace ext4 cannot store.
func XattrSplitName(name string) (index uint8, suffix string, ok bool) {
	for _, p := range xattrPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			suffix = name[len(p.prefix):]
			if XattrWholeName(p.index) && suffix != "" {
				continue
			}
			return p.index, suffix, true
		}
	}
	return 0, "", false
}

// XattrWholeName tells whether index names one attribute by itself
// (system.posix_acl_access, _default, system.richacl): the kernel stores
// those with an empty name (e_name_len 0); every other index is a prefix
// that needs a suffix.
func XattrWholeName(index uint8) bool {
	return index == XattrIndexACLAccess || index == XattrIndexACLDefault || index == XattrIndexRichACL
}

// XattrJoinName maps (index, suffix) back to a full name.
func XattrJoinName(index uint8, suffix string) (string, bool) {
	for _, p := range xattrPrefixes {
		if p.index == index {
			return p.prefix + suffix, true
		}
	}
	return "", false
}

// XattrEntry is a decoded struct ext4_xattr_entry.
type XattrEntry struct {
	NameLen   uint8
	NameIndex uint8
	ValueOffs uint16
	ValueInum uint32
	ValueSize uint32
	Hash      uint32
}

// DecodeXattrEntry parses the 16-byte entry header at b.
func DecodeXattrEntry(b []byte) XattrEntry {
	return XattrEntry{
		NameLen:   b[0],
		NameIndex: b[1],
		ValueOffs: binary.LittleEndian.Uint16(b[2:]),
		ValueInum: binary.LittleEndian.Uint32(b[4:]),
		ValueSize: binary.LittleEndian.Uint32(b[8:]),
		Hash:      binary.LittleEndian.Uint32(b[12:]),
	}
}

// EncodeInto writes the 16-byte entry header at b.
func (e XattrEntry) EncodeInto(b []byte) {
	b[0], b[1] = e.NameLen, e.NameIndex
	binary.LittleEndian.PutUint16(b[2:], e.ValueOffs)
	binary.LittleEndian.PutUint32(b[4:], e.ValueInum)
	binary.LittleEndian.PutUint32(b[8:], e.ValueSize)
	binary.LittleEndian.PutUint32(b[12:], e.Hash)
}

// XattrEntrySize is the padded size of an entry with an n-byte name.
func XattrEntrySize(n int) int { return (XattrEntryLen + n + XattrPad - 1) &^ (XattrPad - 1) }

// XattrValueSize is the padded size of an n-byte value.
func XattrValueSize(n int) int { return (n + XattrPad - 1) &^ (XattrPad - 1) }

// XattrEntryHash is ext4_xattr_hash_entry (the unsigned-char variant the
// kernel writes since 6.2; e2fsck accepts both).
func XattrEntryHash(name []byte, value []byte) uint32 {
	var h uint32
	for _, c := range name {
		h = (h << 5) ^ (h >> 27) ^ uint32(c)
	}
	for i := 0; i+4 <= len(value); i += 4 {
		h = (h << 16) ^ (h >> 16) ^ binary.LittleEndian.Uint32(value[i:])
	}
	if r := len(value) % 4; r != 0 {
		var last [4]byte
		copy(last[:], value[len(value)-r:])
		h = (h << 16) ^ (h >> 16) ^ binary.LittleEndian.Uint32(last[:])
	}
	return h
}

// XattrBlockHash is ext4_xattr_rehash: the block header's h_hash.
func XattrBlockHash(entryHashes []uint32) uint32 {
	var h uint32
	for _, eh := range entryHashes {
		if eh == 0 {
			return 0
		}
		h = (h << 16) ^ (h >> 16) ^ eh
	}
	return h
}

// XattrBlockChecksum is crc32c(fs seed, le64 block number, block with
// h_checksum zeroed).
func XattrBlockChecksum(fsSeed uint32, blockNr uint64, block []byte) uint32 {
	c := CRC32cU64(fsSeed, blockNr)
	c = CRC32c(c, block[:16])
	c = CRC32c(c, []byte{0, 0, 0, 0})
	return CRC32c(c, block[20:])
}
