package ext4lite

import (
	"io"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// View returns the volume's bytes as ext4lite sees them: the file with
// every staged change and, for a read-only open of a volume that needed
// recovery, the journal replayed in memory. Check(v.View(), …) thus checks
// a recovered volume without writing to it. It is valid until Close.
func (v *FS) View() Device { return viewDev{v} }

type viewDev struct{ v *FS }

func (d viewDev) ReadAt(p []byte, off int64) (int, error) {
	d.v.mu.Lock()
	defer d.v.mu.Unlock()
	if err := d.v.readAt(p, off); err != nil {
		// Past the end: report like a file would.
		n, rerr := d.v.dev.ReadAt(p, off)
		if rerr == nil {
			rerr = err
		}
		return n, rerr
	}
	return len(p), nil
}

func (d viewDev) WriteAt(p []byte, off int64) (int, error) { return 0, ErrReadOnly }

var _ io.ReaderAt = viewDev{}

// NeedsRecovery reports whether the volume on dev says its journal must be
// replayed before it is consistent (needs_recovery).
func NeedsRecovery(dev io.ReaderAt) (bool, error) {
	b := make([]byte, disk.SuperblockSize)
	if _, err := dev.ReadAt(b, disk.SuperblockOffset); err != nil {
		return false, err
	}
	sb, err := disk.DecodeSuperblock(b)
	if err != nil {
		return false, err
	}
	if sb.Magic != disk.Magic {
		return false, ErrNotExt4
	}
	return sb.FeatureIncompat&disk.IncompatRecover != 0, nil
}
