package durable

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace is renamex_np RENAME_EXCL; errors.ErrUnsupported where
// the filesystem lacks it.
func renameNoReplace(oldpath, newpath string) error {
	err := ignoringEINTR(func() error { return unix.RenamexNp(oldpath, newpath, unix.RENAME_EXCL) })
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return errors.ErrUnsupported
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}
