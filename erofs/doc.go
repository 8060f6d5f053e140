// Package erofs writes and reads EROFS images: the read-only, page-cache
// friendly filesystem gvx keeps base images in, mounted natively by
// gVisor's Sentry (gvisor.dev/gvisor/pkg/erofs) and by the Linux kernel.
//
// The writer is a Builder: an in-memory tree that implements sink.Sink, so
// any walker (tar import, OCI layers via package overlay) can fill it; file
// contents are spooled to a temporary file past Options.MemoryLimit.
// AddDir fills it from a host directory with Options.Workers goroutines and
// spools nothing: WriteTo reads those files, and fails naming one that
// changed meanwhile (grew, shrank, or is no longer a regular file; another
// file of the very size scanned renamed into a small file's place reads as
// the file it now is, as a file rewritten in place would). WriteTo into a
// regular file writes data with the workers at offsets fixed by the layout
// (pwrite, copy_file_range; Finish also starts each run's writeback as it
// goes, since it fsyncs next); into anything else it streams. Either way
// the image is:
//
//   - 4 KiB blocks, superblock at 1024 with its crc32c (SB_CHKSUM); no
//     incompatible feature bits at all, so every EROFS reader mounts it;
//   - compact (32 B) inodes where nothing is lost, extended (64 B) ones to
//     keep ids above 65535, large nlink, sizes of 4 GiB and more, and any
//     mtime other than the image's epoch, to the nanosecond;
//   - FLAT_INLINE (tail packed after the inode) or FLAT_PLAIN data;
//     directories with "." and "..", sorted by name bytes across blocks;
//     symlinks, devices, fifos, sockets; hard links as one inode;
//   - xattrs inline and shared (a name/value pair used by several inodes
//     is stored once), for user., trusted., security. and
//     system.posix_acl_*; names up to 255 bytes.
//
// Output is deterministic: the same tree and options give the same bytes
// (sorted entries and xattrs, no time of day; the epoch comes from
// Options or from the tree), whatever Options.Workers is and whether the
// tree came from AddDir or sink calls.
//
// ProfileRuntime writes what gVisor's Sentry mounts: no xattrs, and
// regular files FLAT_PLAIN so the Sentry can mmap them from the image
// (directories and symlinks stay tail-packed; gVisor reads those). Whatever
// it drops is listed in Report().Warnings.
//
// Open reads an image (ours or mkfs.erofs's, uncompressed) from an
// io.ReaderAt as a sink.Source. It trusts nothing: the superblock is
// checked at Open (magic, checksum, feature masks, geometry) and every
// inode, directory block and xattr when reached, with overflow-safe range
// checks. Damage is reported as a *FormatError wrapping ErrCorrupt,
// unknown features as ErrUnsupported; never a panic or an allocation
// beyond one block or one inode's xattr body. Single lookups do not see
// the tree's shape: a crafted image can name a directory twice (a dirent
// pointing at an ancestor makes a/b/up/a/b/up/… endless). Image.Check
// rejects that; gvx's own walkers (overlay.ExportTar, sink.Copy) enter
// each directory once and stop with a *sink.DirLinkError; a walk of
// Image.FS with fs.WalkDir does not, so run Check on an untrusted image
// first.
//
// Spec: https://docs.kernel.org/filesystems/erofs.html and erofs-utils'
// include/erofs_fs.h.
//
// Example:
//
//	b := erofs.NewBuilder(erofs.Options{Profile: erofs.ProfileRuntime, Path: "rootfs.erofs"})
//	defer b.Close()
//	_ = b.Mkdir(&sink.Header{Path: "etc", Mode: sink.TypeDir | 0o755})
//	_ = b.WriteFile(&sink.Header{Path: "etc/hostname", Mode: 0o644, Size: 4}, strings.NewReader("gvx\n"))
//	if err := b.Finish(); err != nil { // temp file, fsync, rename, fsync dir
//		return err
//	}
//	f, _ := os.Open("rootfs.erofs")
//	st, _ := f.Stat()
//	img, err := erofs.Open(f, st.Size())
package erofs
