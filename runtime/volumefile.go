package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/ext4lite"
)

// DefaultVolumeSize is the size of a volume CreateMissingVolume makes when
// the mount gives none: the file is sparse, so only what the episode
// writes takes space.
const DefaultVolumeSize = 32 << 30

// CreateMissingVolume makes m's volume file when m is a volume mount whose
// Source does not exist yet, as docker creates a named volume on first use
// (the seeds' golden-volume workflow starts from `rungv run --mount
// type=volume,src=golden.ext4,…` with no such file). The new file is an
// empty ext4lite volume of m.Size bytes (DefaultVolumeSize if 0). The
// parent directory must exist. It reports whether it created the file;
// its errors name the file, and the caller names the mount.
func CreateMissingVolume(m Mount) (bool, error) {
	if m.Type != MountVolume {
		return false, nil
	}
	if _, err := os.Lstat(m.Source); !errors.Is(err, fs.ErrNotExist) {
		return false, nil // exists, or an error that Run reports with context
	}
	if st, err := os.Stat(filepath.Dir(m.Source)); err != nil || !st.IsDir() {
		return false, fmt.Errorf("%s does not exist, and its directory cannot hold a new volume: %v", m.Source, err)
	}
	size := m.Size
	if size == 0 {
		size = DefaultVolumeSize
	}
	v, err := ext4lite.Create(m.Source, size, nil)
	if err != nil {
		return false, fmt.Errorf("create the volume %s: %w", m.Source, err)
	}
	if err := v.Close(); err != nil {
		os.Remove(m.Source)
		return false, fmt.Errorf("create the volume %s: %w", m.Source, err)
	}
	return true, nil
}
