package overlay

import (
	"fmt"
	"strings"
	"syscall"
)

// Default limits of the tar walkers (ImportTar, ApplyLayer,
// WriteLayerOverlayFS) on what one archive entry may ask for. Each has an
// option in ImportOptions and LayerOptions; 0 takes the default.
const (
	// DefaultMaxPathDepth bounds an entry's path in components. A
	// 16,384-deep path is some 32 KiB of name; deeper trees are refused
	// with ErrTooLarge and ENAMETOOLONG (every walker and sink does work
	// per component, so depth is what a hostile archive would inflate).
	DefaultMaxPathDepth = 1 << 14
	// DefaultMaxXattrSize bounds one xattr value: Linux's XATTR_SIZE_MAX,
	// what no filesystem stores more of. Past it: ErrTooLarge and E2BIG,
	// never a value dropped or stored empty.
	DefaultMaxXattrSize = 1 << 16
)

// limits are a walker's bounds, defaults applied.
type limits struct {
	maxFileSize  int64 // 0: none
	maxPathDepth int
	maxXattrSize int
}

func newLimits(maxFile int64, depth, xattr int) limits {
	l := limits{maxFileSize: maxFile, maxPathDepth: depth, maxXattrSize: xattr}
	if l.maxPathDepth <= 0 {
		l.maxPathDepth = DefaultMaxPathDepth
	}
	if l.maxXattrSize <= 0 {
		l.maxXattrSize = DefaultMaxXattrSize
	}
	return l
}

// checkPath refuses a path deeper than the limit.
func (l limits) checkPath(p string) error {
	if d := strings.Count(p, "/") + 1; d > l.maxPathDepth {
		return fmt.Errorf("%w: %w: path of %d components, limit %d (MaxPathDepth)", ErrTooLarge, syscall.ENAMETOOLONG, d, l.maxPathDepth)
	}
	return nil
}

// checkXattrs refuses values past the limit.
func (l limits) checkXattrs(x map[string][]byte) error {
	for k, v := range x {
		if len(v) > l.maxXattrSize {
			return fmt.Errorf("%w: %w: xattr %s of %d bytes, limit %d (MaxXattrSize)", ErrTooLarge, syscall.E2BIG, k, len(v), l.maxXattrSize)
		}
	}
	return nil
}
