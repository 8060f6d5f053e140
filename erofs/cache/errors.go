package cache

import "errors"

var (
	// ErrCorrupt reports a damaged index.json.
	ErrCorrupt = errors.New("cache: corrupt")
	// ErrBadName reports an object name that is not <64 hex digits>.<ext>.
	ErrBadName = errors.New("cache: invalid object name")
	// ErrNotExist reports an object that is not in the cache.
	ErrNotExist = errors.New("cache: no such object")
)

// ErrUnsafe reports a cache directory or object that someone other than
// the caller (or root) could have written.
var ErrUnsafe = errors.New("cache: unsafe")
