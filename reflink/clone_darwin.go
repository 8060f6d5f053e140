package reflink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// cloneNew creates the file name as a clone of src with fclonefileat(2)
// (APFS). The clone gets src's mode, owner and extended attributes.
// finish then sets the mode and syncs (settled is false).
func cloneNew(src *os.File, name string, perm fs.FileMode, sync bool) (settled bool, late func(sync bool) error, err error) {
	err = ignoringEINTR(func() error { return unix.Fclonefileat(int(src.Fd()), unix.AT_FDCWD, name, 0) })
	if err != nil {
		return false, nil, &fs.PathError{Op: "fclonefileat", Path: name, Err: err}
	}
	return false, nil, nil
}

// CloneRange makes n bytes of dst at dstOff share the extents of src at
// srcOff. macOS offers no range clone, so it always fails with an error
// wrapping ErrNotSupported.
func CloneRange(dst, src *os.File, dstOff, srcOff, n int64) error {
	if dstOff < 0 || srcOff < 0 || n < 0 {
		return fmt.Errorf("reflink: negative offset or length")
	}
	return notSupported(src.Name(), dst.Name(), unix.ENOTSUP)
}

func isNotSupported(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS)
}

func isCrossDevice(err error) bool { return errors.Is(err, unix.EXDEV) }

func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

func fsTypeName(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return ""
	}
	return unix.ByteSliceToString(st.Fstypename[:])
}

func ignoringEINTR(f func() error) error {
	for {
		err := f()
		if err != unix.EINTR {
			return err
		}
	}
}

// rangeCopier copies byte ranges between two files at equal offsets.
type rangeCopier struct {
	dst, src *os.File
	useCFR   bool // unused: macOS has no copy_file_range
	buf      []byte
}

func (c *rangeCopier) copy(off, end int64) error {
	if c.buf == nil {
		c.buf = make([]byte, copyBuf)
	}
	return copyRange(c.dst, c.src, off, end, c.buf)
}
