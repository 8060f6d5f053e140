// Package jbd2 implements the JBD2 journal that ext4 keeps in its journal
// inode, in the format Linux and e2fsprogs read and write: journal
// superblock v2, descriptor/commit/revoke blocks, 64bit block numbers and
// checksum v2/v3 (crc32c), big-endian.
//
// What it promises:
//
//   - Format writes the journal superblock mkfs.ext4 writes, byte for byte.
//   - A Journal (Open) logs transactions of whole filesystem blocks: Begin,
//     Log, Revoke, Commit. Commit writes descriptor and data blocks, flushes,
//     then writes the commit block and flushes, so a crash at any write
//     leaves every transaction either wholly replayable or absent.
//     Checkpoint writes logged blocks home and frees the log.
//   - Recover replays a journal written by Linux, e2fsprogs or this package
//     the way the kernel does (scan, revoke, replay passes), verifies every
//     checksum, stops at the first torn commit, cuts the log at the first
//     committed transaction that fails a checksum (replaying the ones
//     before it and saying so in Stats.Aborted, as e2fsck does for a bad
//     commit), and never writes outside the filesystem: a tag naming a
//     block past the filesystem's end is corruption.
//
// Trust boundary: journal bytes are untrusted. Every error from parsing them
// wraps ErrCorrupt (a *FormatError naming the journal block) or
// ErrUnsupported; no input makes this package panic, loop forever or
// allocate more than a few blocks beyond the transaction being replayed.
// Journals using fast commits or async commits are refused (ErrUnsupported).
//
// Spec: https://www.kernel.org/doc/html/latest/filesystems/ext4/journal.html
// and the kernel's fs/jbd2/recovery.c.
//
// Example, formatting the journal of a new filesystem:
//
//	err := jbd2.Format(dev, 4096, 1024, jbd2.FormatOptions{UUID: fsUUID})
package jbd2
