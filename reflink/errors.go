package reflink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

var (
	// ErrNotSupported: the filesystem (or the pair of filesystems) holding
	// the source and destination cannot clone, so a clone-only request
	// (Mode Always, CloneRange) failed. Errors wrapping it are
	// *NotSupportedError values that say which filesystem and what to do.
	ErrNotSupported = errors.New("filesystem cannot clone files")
	// ErrNotRegular: the source, or the destination to replace, is not a
	// regular file (a directory, device, socket…).
	ErrNotRegular = errors.New("not a regular file")
	// ErrNoSpace: the destination filesystem ran out of space (a copy, or
	// the metadata of a clone).
	ErrNoSpace = errors.New("no space left on device")
)

// NotSupportedError reports a clone the filesystem refused. It matches
// ErrNotSupported with errors.Is and unwraps to the system's error (for
// example EOPNOTSUPP or EXDEV).
type NotSupportedError struct {
	Src, Dst string
	// FS names the destination's filesystem type ("ext4", "tmpfs", "apfs",
	// "NTFS"…) when it could be found.
	FS string
	// CrossDevice is set when source and destination are on different
	// filesystems, which no filesystem can clone across.
	CrossDevice bool
	Err         error
}

func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("reflink: cannot clone %s to %s: %s; use mode auto to fall "+
		"back to a sparse copy, or %s", e.Src, e.Dst, e.Reason(), Remedy)
}

// Reason says why the clone was refused, for example "the ext4 filesystem
// does not support reflinks (operation not supported)".
func (e *NotSupportedError) Reason() string {
	var why string
	switch {
	case e.CrossDevice:
		why = "source and destination are on different filesystems"
	case e.FS == "xfs" && errors.Is(e.Err, errors.ErrUnsupported):
		why = "this xfs filesystem was made without reflink support (mkfs.xfs -m reflink=0; it cannot be turned on later)"
	case e.FS != "":
		why = fmt.Sprintf("the %s filesystem does not support reflinks", e.FS)
	default:
		why = "the filesystem does not support reflinks"
	}
	return fmt.Sprintf("%s (%v)", why, e.Err)
}

// Remedy is the advice for a filesystem that cannot clone.
const Remedy = "keep golden and episode files together on a filesystem that " +
	"clones: XFS made with -m reflink=1 (the default since xfsprogs 5.1), " +
	"Btrfs, bcachefs, APFS, or ReFS/Dev Drive"

// Unwrap returns ErrNotSupported and the system error.
func (e *NotSupportedError) Unwrap() []error { return []error{ErrNotSupported, e.Err} }

// wrapErr adds the file names and maps running out of space to ErrNoSpace.
func wrapErr(src, dst string, err error) error {
	if errors.Is(err, ErrNotSupported) || errors.Is(err, ErrNotRegular) || errors.Is(err, fs.ErrExist) {
		return err
	}
	if isNoSpace(err) {
		return fmt.Errorf("reflink: %s to %s: %w: %w", src, dst, ErrNoSpace, err)
	}
	return fmt.Errorf("reflink: %s to %s: %w", src, dst, err)
}

// notSupported describes a refused clone of src to dst; err is the system's
// error, for which isNotSupported is true.
func notSupported(src, dst string, err error) *NotSupportedError {
	return &NotSupportedError{
		Src:         src,
		Dst:         dst,
		FS:          fsTypeName(dirOf(dst)),
		CrossDevice: isCrossDevice(err),
		Err:         unwrapSys(err),
	}
}

// unwrapSys strips *fs.PathError and friends down to the system error, so
// messages do not repeat the temporary file's name.
func unwrapSys(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// dirOf is dst's directory, or dst itself when it is a directory (Probe).
func dirOf(dst string) string {
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return dst
	}
	return filepath.Dir(dst)
}
