// Package hostdir makes a host directory a sink.Sink and a sink.Source, so
// layers and tars can be written to, and trees read from, a plain directory
// with the same walkers that fill ext4lite volumes and EROFS images.
//
// On Linux every operation opens the path component by component with
// O_PATH|O_NOFOLLOW and acts on the final name relative to its pinned parent
// (mkdirat, mknodat, symlinkat, linkat, fchownat, utimensat with
// AT_SYMLINK_NOFOLLOW; xattrs through the l* calls on
// /proc/self/fd/PARENT/NAME), so no operation follows a symlink placed in
// the tree by a hostile layer: such a path fails with sink.ErrSymlinkInPath.
// All-zero 4 KiB blocks are written as holes. Metadata is applied in the
// order owner, mode, xattrs, times (chown clears setuid bits; times last).
// What the kernel does not let anyone set is not kept: ctime and crtime, and
// permission bits of symlinks (always 0777 on Linux). Without root, other
// owners, devices and trusted.* xattrs fail with errors wrapping
// fs.ErrPermission; everything else works (the conformance suite runs as
// uid 65534 too). A Dir keeps up to 64 directories it walked to open,
// so entries of one directory cost no walk; Close releases them (do so before
// unmounting a tree a Dir has read).
//
// On other systems a Dir does what package os allows (files, directories,
// symlinks, hard links, mode and times), checks intermediate components with
// Lstat (racy against concurrent renames, unlike Linux), and refuses xattrs,
// devices, fifos, sockets and owners it cannot set with sink.ErrUnsupported.
//
// Example, unpacking a layer into a directory:
//
//	d := hostdir.New("/var/tmp/rootfs")
//	err := overlay.ApplyLayer(d, layerTar, overlay.LayerOptions{})
package hostdir
