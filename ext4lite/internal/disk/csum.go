package disk

import (
	"encoding/binary"
	"hash/crc32"
	"sync"
)

// castagnoli is the CRC-32C table, built on first use rather than at
// package initialisation: the gvx-vol binary links this package for info
// and ls, and its clones should not pay for building the table.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// CRC32c is the kernel's raw crc32c(seed, p): no pre- or post-inversion,
// which Go's crc32.Update applies on both sides.
func CRC32c(seed uint32, p []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli(), p)
}

// CRC32cU32 continues a checksum over one little-endian 32-bit value.
func CRC32cU32(seed, v uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return CRC32c(seed, b[:])
}

// CRC32cU64 continues a checksum over one little-endian 64-bit value.
func CRC32cU64(seed uint32, v uint64) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return CRC32c(seed, b[:])
}

// Crc16 is the legacy group-descriptor checksum (gdt_csum), CRC-16/ANSI as
// in lib/crc16.c; kept for reading volumes without metadata_csum.
func Crc16(crc uint16, p []byte) uint16 {
	for _, b := range p {
		crc ^= uint16(b)
		for i := 0; i < 8; i++ {
			if crc&1 != 0 {
				crc = (crc >> 1) ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}
