package overlay

import (
	"io"

	"z.gfire.dev/gvx/sink"
)

// ImportOptions tunes ImportTar.
type ImportOptions struct {
	// Dest imports under this sub-path of dst ("." or "" for the root);
	// missing directories are created (mode 0755, owner 0:0, epoch times).
	Dest string
	// MaxFileSize refuses regular files larger than this (logical size,
	// holes included) with ErrTooLarge; 0 means no limit. Set it for
	// untrusted input: a sparse entry can claim any size (a sparse one
	// costs only its data to import).
	MaxFileSize int64
	// MaxPathDepth refuses entries whose path (Dest included) has more
	// components, with ErrTooLarge and ENAMETOOLONG; 0 means
	// DefaultMaxPathDepth.
	MaxPathDepth int
	// MaxXattrSize refuses entries with a larger xattr value, with
	// ErrTooLarge and E2BIG; 0 means DefaultMaxXattrSize.
	MaxXattrSize int
}

// ImportTar writes the plain (non-layer) tar archive read from r into dst.
// The stream may be gzip, zstd or bzip2 compressed (detected by magic).
//
// It keeps PAX xattrs (SCHILY.xattr.* and LIBARCHIVE.xattr.*), hard links
// (to an entry already in dst, else ErrCorrupt), devices, fifos, GNU and
// PAX sparse files (old GNU, PAX 0.0, 0.1 and 1.0: handed to the sink as a
// *sink.Sparse, so holes are never read and cost nothing; see
// tar_sparse.go), nanosecond PAX times (an absent atime becomes the mtime), and
// applies directory metadata after all children. Absolute names lose their
// leading "/" as with GNU tar; names with a ".." element are refused with
// ErrUnsafePath, and writes under a symlink with sink.ErrSymlinkInPath. A
// later entry replaces an earlier one at the same path, a directory
// included. Names starting ".wh." are ordinary files here (see ApplyLayer).
//
// Errors are *EntryError values naming the entry.
func ImportTar(dst sink.Sink, r io.Reader, opts ImportOptions) error {
	w, err := newWalker(dst, modeImport, dest(opts.Dest), newLimits(opts.MaxFileSize, opts.MaxPathDepth, opts.MaxXattrSize))
	if err != nil {
		return err
	}
	return w.run(r)
}

func dest(d string) string {
	if d == "" {
		return "."
	}
	return d
}
