// Package reflink clones files: the new file shares the source's extents
// copy-on-write, so it appears in about a millisecond whatever its size
// (mostly the fsyncs; ~0.1 ms with Options.NoSync on an idle XFS), and only
// blocks written later cost space. The cost grows with the number of
// extents, not the size. This is gvx's episode
// reset: clone golden-docker.ext4 to ep-0042.ext4, run the episode, unlink.
//
// Clone and CloneFile use, per system:
//
//   - Linux: the FICLONE ioctl (XFS made with -m reflink=1, the default
//     since xfsprogs 5.1; Btrfs; bcachefs; OCFS2; NFS 4.2 and SMB servers
//     that pass it through). CloneRange uses FICLONERANGE.
//   - macOS: fclonefileat(2) (APFS).
//   - Windows: FSCTL_DUPLICATE_EXTENTS_TO_FILE (ReFS, including Dev Drive).
//
// # What it promises
//
//   - Mode Always (the zero value) clones or fails with an error wrapping
//     ErrNotSupported that names the filesystem and says what to do. It
//     never silently copies data: a 16 GiB full copy where a clone was
//     asked for is a bug this package refuses to have.
//   - Mode Auto clones, or makes a sparse copy when the filesystem cannot
//     clone (or the files are on different filesystems). Mode Never always
//     copies. The copy keeps the source's holes: on Linux and macOS it copies
//     only the ranges lseek(SEEK_DATA/SEEK_HOLE) reports as data (on Linux
//     with copy_file_range(2), in the kernel), so the copy allocates what the
//     source allocates; elsewhere it skips all-zero 4 KiB blocks.
//   - The destination is published atomically: built under a temporary
//     name in its directory, fsynced, renamed into place and the directory
//     fsynced. Readers see no file or the whole file; after a crash there
//     is no half-written destination. (A clone on XFS is fsynced after its
//     rename instead, before the directory: XFS's one log, recovered in
//     commit order, cannot hold the rename without the clone before it,
//     and the two fsyncs then cost one log write instead of two.) An
//     existing destination is never
//     replaced unless Options.Overwrite; the check and the rename are one
//     atomic step (renameat2 RENAME_NOREPLACE, renamex_np RENAME_EXCL,
//     MoveFileEx without MOVEFILE_REPLACE_EXISTING).
//   - The destination gets the source's permission bits, not filtered by
//     the umask. Owner, times and extended attributes are not copied
//     (macOS's clonefile copies them anyway).
//   - Probe and Supported tell up front whether a directory can clone, by
//     cloning a 4 KiB temporary file there.
//
// Errors: ErrNotSupported (*NotSupportedError), ErrNotRegular, ErrNoSpace,
// and fs.ErrExist for a destination that exists.
//
// Trust boundary: paths and file contents are the caller's; the package
// parses no file contents. It follows symbolic links in src and dst as
// open(2) does.
//
// Example: reset an episode's volume from the golden one.
//
//	err := reflink.Clone("/var/lib/gvx/golden-docker.ext4", "/var/lib/gvx/ep-0042.ext4")
//	if errors.Is(err, reflink.ErrNotSupported) {
//		// tell the user: put the volumes on XFS (reflink=1), Btrfs, APFS or ReFS,
//		// or opt in to slow copies with reflink.Options{Mode: reflink.Auto}.
//	}
//
// References: ioctl_ficlone(2), copy_file_range(2), lseek(2) SEEK_DATA,
// clonefile(2), https://learn.microsoft.com/windows/win32/fileio/block-cloning.
package reflink
