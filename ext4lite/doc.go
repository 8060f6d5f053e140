// Package ext4lite creates, reads and writes ext4 filesystems held in one
// regular file (or any Device: an io.ReaderAt and io.WriterAt), without
// mounting, without root and without cgo. gvx keeps each episode's
// /var/lib/docker in such a file; golden volumes are filled by ext4lite and
// reflink-cloned per episode. The on-disk format is the kernel's, as its
// documentation describes it (Documentation/filesystems/ext4/ in the Linux
// tree); docs/ext4lite.md tells how each promise below is tested.
//
// # What it promises
//
// Linux mounts every volume ext4lite writes, e2fsck -fn passes it with
// no complaint, and the kernel reads back what was written: contents,
// type, mode, owner, size, symlink target, device numbers, hard links,
// xattrs and nanosecond times. ext4lite reads and writes volumes made by
// mkfs.ext4 and changed by the kernel (1 KiB blocks, 128-byte inodes,
// uninit_bg, 32-bit, no journal, orphan_file and more), and they stay
// e2fsck-clean. Create's default features are Debian's mkfs.ext4's for a
// volume of 512 MiB or more (has_journal ext_attr dir_index filetype
// extent 64bit flex_bg sparse_super large_file huge_file dir_nlink
// extra_isize metadata_csum), less resize_inode. What it does not
// implement it refuses with an error wrapping ErrUnsupported that names
// the feature, never by writing what Linux would see as corruption:
// meta_bg, bigalloc, inline_data, encrypt, casefold, large_dir, ea_inode
// and any other unknown incompat feature do not open; unknown ro_compat
// features, an external journal, ext2/ext3 volumes and a file shorter than
// its filesystem open read-only; limits of the format (file size, xattr
// size and names) are a *LimitError with the errno Linux gives.
//
// # Volumes are hostile input
//
// A volume may come from anyone (a guest wrote it, a file was swapped).
// Every decoder of on-disk bytes (superblock and geometry, group
// descriptors, inodes, extent trees, directory blocks, htree nodes,
// xattrs, the journal) validates what it reads and returns an error
// wrapping ErrCorrupt (a *FormatError with the byte offset and inode):
// no input makes it panic, loop or allocate beyond what the volume's size
// bounds. Walks are bounded: an extent tree is read block by block once
// each, a recursive removal enters each directory once, a parent chain at
// most as many steps as there are inodes. What one file may cost is a limit
// of Options, with safe defaults:
//
//   - MaxExtentNodes: extent tree blocks read for one file
//     (DefaultMaxExtentNodes, 32,768);
//   - MaxExtents: extents held for one file (DefaultMaxExtents,
//     2,097,152, ~48 MiB); a write fragmenting a file past it is EFBIG;
//   - MaxDirSize: bytes of one directory read (DefaultMaxDirSize, 1 GiB);
//     a larger one is EFBIG before any block is read.
//
// Check (and the function Check, on any Device) is e2fsck -fn in Go: a
// read-only check of every structure that returns its findings instead of
// stopping at the first. FuzzOpen, FuzzExtentTree and the FuzzDecode
// targets of internal/disk feed mutated images to every decoder.
//
// # What survives a crash
//
// Metadata reaches the file only through the jbd2 journal, one transaction
// per flush; file data is written before the metadata that points at it
// (ordered mode). Sync commits a transaction and is durable when it
// returns; ext4lite also flushes on its own when the staged changes near a
// quarter of the journal, between operations, never inside one. A crash
// (or kill -9) at any write leaves the volume as of the last completed
// flush or the one being committed, never a mix, and ext4lite, e2fsck and
// the kernel all replay the journal ext4lite left, as ext4lite replays
// theirs (a read-only open replays in memory). Files unlinked while
// referenced (Ref) sit on the orphan list and are freed by the next
// read-write open. A volume filled before anyone sees it
// (CreateOptions.BulkLoad, CreateFilled) skips the journal and is not a
// valid volume at all until Close has made it whole.
//
// # Concurrency
//
// One mutex per FS serializes every method, File's included: an FS is safe
// for concurrent use, not parallel. Open (read-write) and Create also take
// an exclusive advisory lock on the file (flock; LockFileEx on Windows)
// and fail with ErrInUse while another writer holds it; LockFile gives
// callers that open the file themselves the same lock.
//
// # Which face is for whom
//
// The path API is for tools and importers (gvx-vol, overlay's layer and
// tar import, sink.Copy): paths are clean, slash-separated and relative
// ("." is the root), no symlink is followed in any component, and errors
// are *fs.PathError. *FS is a sink.Sink (Mkdir, WriteFile, Symlink, Mknod,
// Link, RemoveAll: an existing non-directory is replaced, as tar extraction
// needs) and a sink.Source (Lstat, ReadDir, Open, DataRegions); besides,
// Remove, Rename, Readlink, OpenFile, Truncate, Chmod, Chown, Chtimes and
// Getxattr, Listxattr, Setxattr, Removexattr. Sub gives a subtree with a
// root of its own.
//
// The inode API is for the volume server (runtime/volume), which serves a
// guest's lisafs by inode: handles are Ino values, valid across renames
// above them, and an unlinked file stays alive while referenced (Ref,
// Unref), as an open file does. Lookup, Entries, Stat, CreateAt (an
// existing name is fs.ErrExist), UnlinkAt, LinkAt, RenameAt (with
// RenameNoReplace and RenameExchange), ReadAtIno, WriteAtIno, SetAttrIno,
// ReadlinkIno, GetxattrIno, ListxattrIno, SetxattrIno, RemovexattrIno,
// StatFS and FileExtents (where a file's data lies in the volume file, for
// reflink copies). Each pair of faces runs one implementation: the path
// face resolves the path, the inode face the Ino, and both call the same
// function (header, addLink, create, setAttr, editXattr, renameLocked,
// writeAtLocked), so they differ only where documented (Link replaces,
// LinkAt does not).
//
// The bulk API fills a new volume in one go: CreateOptions.BulkLoad, or
// CreateFilled, which publishes the file whole or not at all. Compact,
// Trim and Shrink make a golden volume small and contiguous before it is
// cloned; Info and Check describe and verify one.
//
// # Where things are
//
// By concern, one file each: create.go (new inodes: Mkdir, Mknod,
// CreateAt), writefile.go (WriteFile), symlink.go (a symlink's body),
// link.go and unlink.go (names and link counts, release of an inode),
// rename.go, setattr.go, xattrop.go (the xattr operations; xattr.go their
// storage), lookup.go, stat.go, readwrite.go (file data), ino.go (inode
// handles and references), path.go (path resolution), op.go (what frames
// each operation); below them dir.go and htree.go (directories), extent.go,
// file.go, inode.go, alloc.go, group.go, flush.go and journal.go (the
// transaction), orphan.go, and check_*.go (Check). internal/disk holds the
// on-disk structures and their decoders.
package ext4lite
