package volcmd

import (
	"errors"
	"fmt"
	"os"

	"z.gfire.dev/gvx/ext4lite"
)

// openVolume opens FILE with a hint when it is not a volume.
func openVolume(path string, readOnly bool) (*ext4lite.FS, error) {
	v, err := ext4lite.Open(path, &ext4lite.Options{ReadOnly: readOnly})
	if err == nil {
		return v, nil
	}
	switch {
	case errors.Is(err, ext4lite.ErrNotExt4):
		return nil, fmt.Errorf("%s is not an ext4 volume (make one with: gvx-vol create %s)", path, path)
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w (make one with: gvx-vol create --size 8G %s)", err, path)
	case errors.Is(err, ext4lite.ErrCorrupt):
		return nil, fmt.Errorf("%w\n(gvx-vol fsck %s lists what is wrong)", err, path)
	}
	return nil, err
}
