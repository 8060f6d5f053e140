package disk

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the kernel's crc32c(seed, p): the raw CRC with no pre- or
// post-inversion, which jbd2_chksum and ext4_chksum use. Go's crc32 inverts
// on the way in and out, so undo both.
func CRC32C(seed uint32, p []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli, p)
}

// CsumSeed is j_csum_seed: crc32c(~0, s_uuid).
func CsumSeed(uuid [16]byte) uint32 {
	return CRC32C(^uint32(0), uuid[:])
}
