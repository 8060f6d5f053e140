package reflink

import (
	"fmt"
	"io"
	"os"
)

const (
	// copyBuf is the buffer of the read/write copy loops.
	copyBuf = 1 << 20
	// zeroBlock is the granularity at which copySkipZeros leaves holes.
	zeroBlock = 4 << 10
)

// copyRange copies src[off:end) to the same offsets of dst with pread and
// pwrite, in buf-sized pieces.
func copyRange(dst, src *os.File, off, end int64, buf []byte) error {
	for off < end {
		n := int64(len(buf))
		if end-off < n {
			n = end - off
		}
		m, err := src.ReadAt(buf[:n], off)
		if int64(m) < n {
			if err == nil || err == io.EOF {
				err = errShrunk(src, off+int64(m))
			}
			return err
		}
		if _, err := dst.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// copySkipZeros copies size bytes of src to dst (already truncated to
// size) leaving every all-zero zeroBlock as a hole: the sparse copy for
// filesystems that cannot report their holes.
func copySkipZeros(dst, src *os.File, size int64) (int64, error) {
	buf := make([]byte, copyBuf)
	var copied int64
	for off := int64(0); off < size; {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		m, err := src.ReadAt(buf[:n], off)
		if int64(m) < n {
			if err == nil || err == io.EOF {
				err = errShrunk(src, off+int64(m))
			}
			return copied, err
		}
		// Write each run of non-zero blocks with one call.
		for i := int64(0); i < n; {
			if isZero(buf[i:min(i+zeroBlock, n)]) {
				i += zeroBlock
				continue
			}
			j := i + zeroBlock
			for j < n && !isZero(buf[j:min(j+zeroBlock, n)]) {
				j += zeroBlock
			}
			j = min(j, n)
			if _, err := dst.WriteAt(buf[i:j], off+i); err != nil {
				return copied, err
			}
			copied += j - i
			i = j
		}
		off += n
	}
	return copied, nil
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func errShrunk(src *os.File, at int64) error {
	return fmt.Errorf("%s: file shrank to %d bytes while being copied: %w", src.Name(), at, io.ErrUnexpectedEOF)
}
