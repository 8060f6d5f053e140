package erofs

import (
	"errors"
	"fmt"
)

// ReaderOptions bound what the reader spends on one image, whatever its bytes
// say: hostile images get an error wrapping ErrTooLarge, never a giant
// allocation. The zero value (and Open) takes the defaults.
type ReaderOptions struct {
	// MaxInodes bounds the inodes Check tracks at once (its memory grows
	// with them: some 100 bytes each); 0 means DefaultMaxInodes. An image
	// of 32-byte inodes could otherwise make a 1 GiB image cost ~3 GiB.
	MaxInodes int64
	// MaxDirEntries bounds the names ReadDir returns for one directory;
	// 0 means DefaultMaxDirEntries.
	MaxDirEntries int
}

// Defaults of ReaderOptions.
const (
	DefaultMaxInodes     = 1 << 24 // 16 Mi inodes, ~1.6 GiB for Check's map at most
	DefaultMaxDirEntries = 1 << 22 // 4 Mi names in one directory
)

// ErrTooLarge reports an image past a limit of ReaderOptions; the error is a
// *LimitError saying which.
var ErrTooLarge = errors.New("erofs: image past a reader limit")

// LimitError reports which limit of ReaderOptions an image went past.
type LimitError struct {
	What  string // "inodes", "entries of directory 42"
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("erofs: %s past the limit of %d (ReaderOptions)", e.What, e.Limit)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

func (o ReaderOptions) maxInodes() int64 {
	if o.MaxInodes > 0 {
		return o.MaxInodes
	}
	return DefaultMaxInodes
}

func (o ReaderOptions) maxDirEntries() int {
	if o.MaxDirEntries > 0 {
		return o.MaxDirEntries
	}
	return DefaultMaxDirEntries
}
