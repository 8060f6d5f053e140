package overlay

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt reports a malformed archive: a bad header, truncated data,
	// a hard link to nothing.
	ErrCorrupt = errors.New("overlay: corrupt archive")
	// ErrUnsupported reports a valid archive feature gvx does not handle
	// (an unknown entry type, an unknown compression).
	ErrUnsupported = errors.New("overlay: unsupported")
	// ErrUnsafePath reports an entry whose name or hard-link target would
	// leave the target tree ("..").
	ErrUnsafePath = errors.New("overlay: path escapes the target")
	// ErrTooLarge reports an entry above a configured size limit.
	ErrTooLarge = errors.New("overlay: entry too large")
	// ErrTooLong reports an export entry whose path is over
	// ExportOptions.MaxPath.
	ErrTooLong = errors.New("overlay: path longer than the export's MaxPath")
)

// EntryError names the archive entry an error happened at. Name is the
// entry's name as stored in the archive; for an unreadable header it is the
// last good entry, and After is set.
type EntryError struct {
	Name  string
	After bool // the error is in the header following Name
	Err   error
}

func (e *EntryError) Error() string {
	if e.After {
		if e.Name == "" {
			return fmt.Sprintf("overlay: first tar header: %v", e.Err)
		}
		return fmt.Sprintf("overlay: tar header after entry %q: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("overlay: tar entry %q: %v", e.Name, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }
