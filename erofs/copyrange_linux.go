package erofs

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyRange copies n bytes from the file src (fd srcFD) at srcOff to dst
// at dstOff inside the kernel (copy_file_range: a reflink where the
// filesystem shares blocks, else a copy that never reaches user space),
// falling back to reads and writes where the kernel cannot.
func copyRange(dst *os.File, dstOff int64, srcFD uintptr, src io.ReaderAt, srcOff, n int64) error {
	for n > 0 {
		in, out := srcOff, dstOff
		k, err := unix.CopyFileRange(int(srcFD), &in, int(dst.Fd()), &out, int(min(n, 1<<30)), 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			switch err {
			case unix.EXDEV, unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP, unix.EBADF:
				return copyRangeSlow(dst, dstOff, src, srcOff, n)
			}
			return err
		}
		if k == 0 {
			return errShortCopy
		}
		srcOff, dstOff, n = srcOff+int64(k), dstOff+int64(k), n-int64(k)
	}
	return nil
}

// startWriteback asks the kernel to start writing f's dirty pages in
// [off, off+n) to disk without waiting for it (sync_file_range
// SYNC_FILE_RANGE_WRITE): the fsync after is then left with less to do.
// A hint: an error here is the fsync's to report.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// canWriteAt says whether f takes pwrite at an offset: not with O_APPEND,
// where Linux appends whatever the offset.
func canWriteAt(f *os.File) bool {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_APPEND == 0
}
