package ext4lite

import (
	"errors"
	"fmt"
	"io/fs"
)

// Sentinel errors. Every error ext4lite returns for a bad volume wraps
// ErrCorrupt; for a volume using something ext4lite does not implement,
// ErrUnsupported; for a full volume, ErrNoSpace.
var (
	ErrCorrupt     = errors.New("ext4lite: corrupt filesystem")
	ErrUnsupported = errors.New("ext4lite: unsupported")
	ErrNoSpace     = errors.New("ext4lite: no space left on volume")
	ErrNotExt4     = errors.New("ext4lite: not an ext4 filesystem")
	ErrReadOnly    = errors.New("ext4lite: volume opened read-only")
	ErrClosed      = errors.New("ext4lite: volume closed")
)

// FormatError reports corrupt on-disk bytes: where and what. It unwraps to
// ErrCorrupt.
type FormatError struct {
	Off int64  // byte offset in the volume, -1 when not known
	Ino uint32 // inode concerned, 0 when none
	Msg string
}

func (e *FormatError) Error() string {
	s := "ext4lite: corrupt filesystem"
	if e.Ino != 0 {
		s += fmt.Sprintf(": inode %d", e.Ino)
	}
	if e.Off >= 0 {
		s += fmt.Sprintf(" (at byte %d)", e.Off)
	}
	return s + ": " + e.Msg
}

func (e *FormatError) Unwrap() error { return ErrCorrupt }

func corruptf(off int64, ino uint32, format string, args ...any) error {
	return &FormatError{Off: off, Ino: ino, Msg: fmt.Sprintf(format, args...)}
}

func pathErr(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}
