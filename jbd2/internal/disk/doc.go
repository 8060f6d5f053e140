// Package disk holds the on-disk layout of the JBD2 journal: the journal
// superblock, block header, descriptor block tags, commit block, revoke block
// and block tail, their constants, and the crc32c helpers the checksums use.
//
// Everything is big-endian, as in the kernel's include/linux/jbd2.h and
// e2fsprogs' lib/ext2fs/kernel-jbd.h. Field names are the C names in Go case
// (s_maxlen → MaxLen). Each structure has a fixed-size Go struct whose layout
// a test compares with encoding/binary, plus allocation-free Marshal and
// Unmarshal methods that never read or write past the buffer they are given.
//
// Spec: https://www.kernel.org/doc/html/latest/filesystems/ext4/journal.html
package disk
