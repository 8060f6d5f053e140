package overlay

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is a stream compression recognised by its magic bytes.
type Compression int

const (
	Uncompressed Compression = iota
	Gzip
	Zstd
	Bzip2
	Xz
)

func (c Compression) String() string {
	return [...]string{"uncompressed", "gzip", "zstd", "bzip2", "xz"}[c]
}

var magics = []struct {
	c     Compression
	magic []byte
}{
	{Gzip, []byte{0x1f, 0x8b}},
	{Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{Bzip2, []byte("BZh")}, // plus a level digit, checked below
	{Xz, []byte{0xfd, '7', 'z', 'X', 'Z', 0}},
}

// Detect peeks at the start of br and names its compression. A stream
// that starts with a ustar header is uncompressed whatever its first bytes
// (a file named "BZh…" is no bzip2 stream).
func Detect(br *bufio.Reader) Compression {
	if head, _ := br.Peek(263); len(head) == 263 && string(head[257:262]) == "ustar" {
		return Uncompressed
	}
	head, _ := br.Peek(6)
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			if m.c == Bzip2 && (len(head) < 4 || head[3] < '1' || head[3] > '9') {
				continue
			}
			return m.c
		}
	}
	return Uncompressed
}

// Decompress returns the uncompressed stream of r, detecting gzip, zstd
// and bzip2 by their magic bytes; xz is refused with ErrUnsupported. The
// zstd decoder's window is capped at 128 MiB so a hostile frame cannot ask
// for more memory. The returned closer releases decoder resources.
func Decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 16<<10)
	switch c := Detect(br); c {
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		return zr, nil
	case Zstd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		return zr.IOReadCloser(), nil
	case Bzip2:
		return io.NopCloser(bzip2.NewReader(br)), nil
	case Xz:
		return nil, fmt.Errorf("%w: %s compression", ErrUnsupported, c)
	}
	return io.NopCloser(br), nil
}
