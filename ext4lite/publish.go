package ext4lite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/internal/durable"
)

// CreateFilled makes a new volume at path filled by fill, published whole
// or not at all: the volume is created as a temporary file beside path
// with BulkLoad (no journal transactions while it fills), closed, which
// makes it durable, and renamed to path, then the directory is fsynced.
// If fill or anything else fails, or the process dies, path is not
// created (an existing path is replaced only with opts.Overwrite, and only
// at the rename) and a leftover temporary file ".NAME.tmp-*" is no volume
// at all (see BulkLoad). fill must not close v.
func CreateFilled(path string, size int64, opts *CreateOptions, fill func(v *FS) error) (err error) {
	var o CreateOptions
	if opts != nil {
		o = *opts
	}
	overwrite := o.Overwrite
	o.BulkLoad, o.Overwrite = true, true
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
	}
	dir := filepath.Dir(path)
	tf, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	tmp := tf.Name()
	err = tf.Chmod(0o644) // as Create makes it, not CreateTemp's 0600
	tf.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	v, err := Create(tmp, size, &o)
	if err != nil {
		return err
	}
	if err := fill(v); err != nil {
		v.Close()
		return err
	}
	if err := v.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if overwrite {
		err = os.Rename(tmp, path)
	} else if err = os.Link(tmp, path); err == nil {
		// A hard link publishes without replacing what appeared
		// meanwhile; path is whole, whatever becomes of tmp.
		os.Remove(tmp)
	} else if !errors.Is(err, fs.ErrExist) {
		// No hard links on this filesystem: check, then rename.
		if _, serr := os.Lstat(path); serr == nil {
			err = fs.ErrExist
		} else {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return durable.SyncDir(dir)
}
