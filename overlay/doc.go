// Package overlay moves trees between tar archives and filesystem sinks:
// plain tar import and export, and OCI image layers with their whiteout
// semantics, either applied (flattened) or written in overlayfs's own
// on-disk form.
//
// Every walker writes through sink.Sink, so the same code fills an
// ext4lite volume, the EROFS builder, a host directory (sink/hostdir) or an
// in-memory tree (sink/sinktest.MemFS).
//
// # Concurrency
//
// On more than one core a walk reads and parses the archive in a goroutine
// of its own, ahead of the sink by at most 8 MiB of data (pipeline.go);
// the sink is only called from the caller's goroutine, in archive order,
// and the archive's reader is not read after the walk returns.
//
// # Trust boundary
//
// Archives are untrusted. Entry names are cleaned (leading "/" stripped as
// GNU tar does, ".." elements refused with ErrUnsafePath), nothing is written
// through a symlink (sinks refuse it, see package sink), hard links must
// point at an existing non-directory, numbers are range-checked before they
// are narrowed, and header sizes are never used to size an allocation; a
// MaxFileSize option bounds what a (sparse) entry may claim. Errors name the
// entry (*EntryError) and wrap ErrCorrupt, ErrUnsupported, ErrUnsafePath or
// ErrTooLarge.
//
// # Plain tar
//
// ImportTar reads gzip, zstd, bzip2 or uncompressed tar (detected by magic)
// with PAX xattrs (SCHILY.xattr.*, LIBARCHIVE.xattr.*), nanosecond times,
// devices, fifos, hard links and GNU/PAX sparse files, applying directory
// metadata after children. ExportTar writes a deterministic PAX archive
// that ImportTar and GNU tar (--xattrs --xattrs-include='*') restore
// losslessly.
//
// # OCI layers
//
// See https://github.com/opencontainers/image-spec/blob/main/layer.md.
// ApplyLayer applies one layer onto the tree below it: ".wh.NAME" deletes
// NAME of lower layers, ".wh..wh..opq" hides every lower entry of its
// directory while keeping this layer's entries whatever their order in the
// archive, a later entry replaces an earlier one of another type, and
// directory metadata comes from the last layer that has the directory.
// Flatten applies several layers in order. WriteLayerOverlayFS writes one
// layer as overlayfs and Docker's overlay2 driver store it: whiteouts as
// character devices 0:0, opaque directories with trusted.overlay.opaque=y
// (user.overlay.opaque=y with LayerOptions.UserXattr, for userxattr mounts).
//
// Example, unpacking an image's layers into a directory:
//
//	d := hostdir.New("/var/tmp/rootfs")
//	err := overlay.Flatten(d, base, app) // io.Readers of layer blobs
//
// and copying a tree into a tar:
//
//	err := overlay.ExportTar(w, src, overlay.ExportOptions{Compression: overlay.Zstd})
package overlay
