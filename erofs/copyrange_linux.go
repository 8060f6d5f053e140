package erofs

import (
	"os"

	"golang.org/x/sys/unix"
)

// copyRange copies n bytes from src at srcOff to dst at dstOff inside the
// kernel (copy_file_range: a reflink where the filesystem shares blocks,
// else a copy that never reaches user space), falling back to reads and
// writes where the kernel cannot.
func copyRange(dst *os.File, dstOff int64, src *os.File, srcOff, n int64) error {
	for n > 0 {
		in, out := srcOff, dstOff
		k, err := unix.CopyFileRange(int(src.Fd()), &in, int(dst.Fd()), &out, int(min(n, 1<<30)), 0)
		if err != nil || k == 0 {
			if k == 0 && err == nil {
				return errShortCopy
			}
			switch err {
			case unix.EXDEV, unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP, unix.EBADF:
				return copyRangeSlow(dst, dstOff, src, srcOff, n)
			}
			return err
		}
		srcOff, dstOff, n = srcOff+int64(k), dstOff+int64(k), n-int64(k)
	}
	return nil
}
