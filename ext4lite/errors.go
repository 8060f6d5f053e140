package ext4lite

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
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

// LimitError reports a request past a limit of the on-disk format or of
// the options: a file size past the largest an extent-mapped file can have,
// or a file fragmented past Options.MaxExtents (EFBIG), an xattr value
// larger than one attribute can hold (E2BIG), an xattr name longer than
// 255 bytes (ERANGE). It unwraps to that errno, so callers test it
// with errors.Is(err, syscall.EFBIG) and the volume server hands the guest
// the errno Linux's ext4 would.
type LimitError struct {
	Op    string        // "write", "truncate", "setxattr"
	What  string        // "file size", "value of xattr user.big", ...
	Size  uint64        // what was asked for
	Max   uint64        // the format's maximum
	Errno syscall.Errno // syscall.EFBIG, syscall.E2BIG or syscall.ERANGE
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("ext4lite: %s: %s %d is past the maximum of %d (%s)", e.Op, e.What, e.Size, e.Max, errnoName(e.Errno))
}

func (e *LimitError) Unwrap() error { return e.Errno }

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EFBIG:
		return "EFBIG"
	case syscall.E2BIG:
		return "E2BIG"
	case syscall.ERANGE:
		return "ERANGE"
	}
	return e.Error()
}
