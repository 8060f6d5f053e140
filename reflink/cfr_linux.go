package reflink

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// rangeCopier copies byte ranges between two files at equal offsets with
// copy_file_range(2) (in-kernel, no user-space buffer), falling back to
// pread/pwrite when the kernel or filesystem cannot.
type rangeCopier struct {
	dst, src *os.File
	useCFR   bool
	buf      []byte
}

func (c *rangeCopier) copy(off, end int64) error {
	for c.useCFR && off < end {
		roff, woff := off, off
		n, err := unix.CopyFileRange(int(c.src.Fd()), &roff, int(c.dst.Fd()), &woff, int(min(end-off, 1<<30)), 0)
		switch {
		case err == nil && n == 0:
			return errShrunk(c.src, off)
		case err == nil:
			off += int64(n)
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EXDEV),
			errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL),
			errors.Is(err, unix.EPERM), errors.Is(err, unix.ETXTBSY):
			c.useCFR = false
		default:
			return &os.LinkError{Op: "copy_file_range", Old: c.src.Name(), New: c.dst.Name(), Err: err}
		}
	}
	if off >= end {
		return nil
	}
	if c.buf == nil {
		c.buf = make([]byte, copyBuf)
	}
	return copyRange(c.dst, c.src, off, end, c.buf)
}
