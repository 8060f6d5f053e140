//go:build !linux

package erofs

import (
	"io"
	"os"
)

// copyRange copies n bytes from src at srcOff to dst at dstOff.
func copyRange(dst *os.File, dstOff int64, _ uintptr, src io.ReaderAt, srcOff, n int64) error {
	return copyRangeSlow(dst, dstOff, src, srcOff, n)
}

// canWriteAt: elsewhere WriteTo streams.
func canWriteAt(*os.File) bool { return false }

// startWriteback: elsewhere the fsync does it all.
func startWriteback(*os.File, int64, int64) {}
