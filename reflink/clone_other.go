//go:build !linux && !darwin && !windows

package reflink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// cloneNew: this system has no clone call gvx knows; Auto copies.
func cloneNew(src *os.File, name string, perm fs.FileMode, sync bool) (settled bool, late func(sync bool) error, err error) {
	return false, nil, &fs.PathError{Op: "clone", Path: name, Err: errors.ErrUnsupported}
}

// CloneRange always fails with an error wrapping ErrNotSupported here.
func CloneRange(dst, src *os.File, dstOff, srcOff, n int64) error {
	if dstOff < 0 || srcOff < 0 || n < 0 {
		return fmt.Errorf("reflink: negative offset or length")
	}
	return notSupported(src.Name(), dst.Name(), errors.ErrUnsupported)
}

func isNotSupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }
func isCrossDevice(err error) bool  { return false }
func isNoSpace(err error) bool      { return false }
func fsTypeName(path string) string { return "" }

func copyData(dst, src *os.File, size int64, mayShare bool) (int64, error) {
	if err := dst.Truncate(size); err != nil {
		return 0, err
	}
	return copySkipZeros(dst, src, size)
}
