package disk

import (
	"hash/crc32"
	"sync"
)

// castagnoli is the CRC-32C table, built on first use rather than at
// package initialisation: the gvx-vol binary links this package for info
// and ls, and its clones should not pay for building the table.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// CRC32C is the kernel's crc32c(seed, p): the raw CRC with no pre- or
// post-inversion, which jbd2_chksum and ext4_chksum use. Go's crc32 inverts
// on the way in and out, so undo both.
func CRC32C(seed uint32, p []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli(), p)
}

// CsumSeed is j_csum_seed: crc32c(~0, s_uuid).
func CsumSeed(uuid [16]byte) uint32 {
	return CRC32C(^uint32(0), uuid[:])
}

// crc32BETable is the table of the kernel's crc32_be (CRC-32 polynomial
// 0x04C11DB7, MSB first, no reflection).
var crc32BETable = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04C11DB7
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC32BE is the kernel's crc32_be(crc, p), which checksum v1
// (COMPAT_CHECKSUM) uses: each transaction's descriptor and logged
// blocks, from ~0, stored in its commit block's h_chksum[0].
func CRC32BE(crc uint32, p []byte) uint32 {
	for _, b := range p {
		crc = crc<<8 ^ crc32BETable[byte(crc>>24)^b]
	}
	return crc
}

// Checksum v1 in a commit block (h_chksum_type, h_chksum_size).
const (
	ChksumTypeCRC32 = 1 // JBD2_CRC32_CHKSUM
	ChksumSizeCRC32 = 4 // JBD2_CRC32_CHKSUM_SIZE
)

// CommitV1OK reports whether a commit block carries the v1 checksum sum,
// or none (type, size and h_chksum[0] all 0), as the kernel's do_one_pass
// accepts.
func CommitV1OK(block []byte, sum uint32) bool {
	typ, size, got := block[0x0C], block[0x0D], be.Uint32(block[CommitOffChksum:])
	return typ == ChksumTypeCRC32 && size == ChksumSizeCRC32 && got == sum || typ == 0 && size == 0 && got == 0
}
