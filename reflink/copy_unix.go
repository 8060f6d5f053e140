//go:build linux || darwin

package reflink

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// copyData copies size bytes of src into dst, keeping src's holes: it asks
// the filesystem where the data is (lseek SEEK_DATA/SEEK_HOLE) and copies
// only that, then sets dst's length. mayShare allows copy_file_range, which
// on some filesystems shares extents instead of copying (not for Never).
// It returns the number of data bytes copied.
func copyData(dst, src *os.File, size int64, mayShare bool) (int64, error) {
	if err := dst.Truncate(size); err != nil {
		return 0, err
	}
	sfd := int(src.Fd())
	rc := rangeCopier{dst: dst, src: src, useCFR: mayShare}
	var copied int64
	for off := int64(0); off < size; {
		data, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		}
		if err != nil {
			if off == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) {
				return copySkipZeros(dst, src, size)
			}
			return copied, &os.PathError{Op: "lseek SEEK_DATA", Path: src.Name(), Err: err}
		}
		if data >= size {
			break
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return copied, &os.PathError{Op: "lseek SEEK_HOLE", Path: src.Name(), Err: err}
		}
		hole = min(hole, size)
		if err := rc.copy(data, hole); err != nil {
			return copied, err
		}
		copied += hole - data
		off = hole
	}
	// SEEK_DATA cannot tell a hole at the end from a file that shrank.
	if fi, err := src.Stat(); err != nil {
		return copied, err
	} else if fi.Size() < size {
		return copied, errShrunk(src, fi.Size())
	}
	return copied, nil
}
