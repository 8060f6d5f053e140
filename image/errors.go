package image

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound reports a reference, tag, digest or file that names no
	// image.
	ErrNotFound = errors.New("image: not found")
	// ErrAuth reports a registry that refused our credentials (or their
	// absence).
	ErrAuth = errors.New("image: authentication failed")
	// ErrUnsupported reports a source or artifact gvx cannot flatten.
	ErrUnsupported = errors.New("image: unsupported")
	// ErrCorrupt reports image content that contradicts its own digests.
	ErrCorrupt = errors.New("image: corrupt")
	// ErrBadSource reports a SOURCE string that cannot be parsed.
	ErrBadSource = errors.New("image: invalid source")
)

// PlatformError reports an index with no image for the wanted platform.
// It wraps ErrNotFound.
type PlatformError struct {
	Source    string
	Want      string   // os/arch[/variant]
	Available []string // platforms the index offers, in index order
}

func (e *PlatformError) Error() string {
	avail := "none"
	if len(e.Available) > 0 {
		avail = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("image: %s has no image for platform %s (available: %s; choose one with --platform)", e.Source, e.Want, avail)
}

func (e *PlatformError) Unwrap() error { return ErrNotFound }
