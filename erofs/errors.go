package erofs

import (
	"errors"
	"fmt"
)

// Errors returned by the builder and the reader. Test with errors.Is.
var (
	// ErrCorrupt reports an image whose bytes break the format; the error
	// is a *FormatError saying where.
	ErrCorrupt = errors.New("erofs: corrupt image")
	// ErrUnsupported reports a valid image feature, or a tree property,
	// that this package does not handle (compressed or chunked data, an
	// unknown incompat feature, an xattr namespace EROFS cannot name, a
	// device number over 12:20 bits).
	ErrUnsupported = errors.New("erofs: not supported")
	// ErrNoSpace reports a tree too big for the format's 32-bit block
	// addresses (16 TiB with 4 KiB blocks).
	ErrNoSpace = errors.New("erofs: image would exceed the format's limits")
)

// FormatError locates a corruption: Off is the byte offset in the image of
// the record that is wrong. It unwraps to ErrCorrupt.
type FormatError struct {
	Off int64
	Msg string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("erofs: corrupt image at offset %#x: %s", e.Off, e.Msg)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *FormatError) Unwrap() error { return ErrCorrupt }

func corruptf(off int64, format string, args ...any) error {
	return &FormatError{Off: off, Msg: fmt.Sprintf(format, args...)}
}
