// Package disk declares ext4's on-disk structures and constants, once, with
// the kernel's field names in Go case (s_blocks_count_lo → BlocksCountLo).
// It encodes and decodes bytes and computes checksums; it makes no decision
// about a filesystem. Ground truth: the kernel's
// Documentation/filesystems/ext4/ (ondisk/*.rst) and fs/ext4/ext4.h.
//
// All multi-byte fields are little-endian. Structures are encoded with
// encoding/binary from Go structs whose layout matches the C structs field
// for field; disk_test.go asserts every size.
package disk
