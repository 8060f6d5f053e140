package erofs

import (
	"errors"
	"io"
	"os"
)

var errShortCopy = errors.New("file ended early (truncated while the image was built?)")

// copyRangeSlow is copyRange through a buffer.
func copyRangeSlow(dst *os.File, dstOff int64, src io.ReaderAt, srcOff, n int64) error {
	k, err := io.Copy(io.NewOffsetWriter(dst, dstOff), io.NewSectionReader(src, srcOff, n))
	if err == nil && k < n {
		err = errShortCopy
	}
	return err
}
