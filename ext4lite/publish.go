package ext4lite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"z.gfire.dev/gvx/internal/durable"
)

// CreateFilled makes a new volume at path filled by fill, published whole
// or not at all: the volume is created as a temporary file beside path
// with BulkLoad (no journal transactions while it fills), closed, which
// makes it durable, and renamed to path, then the directory is fsynced
// (durable.Publish). If fill or anything else fails, or the process dies,
// path is not created (an existing path is replaced only with
// opts.Overwrite, and only at the rename) and a leftover temporary file
// ".NAME.tmp-*" is no volume at all (see BulkLoad). fill must not close v.
func CreateFilled(path string, size int64, opts *CreateOptions, fill func(v *FS) error) (err error) {
	var o CreateOptions
	if opts != nil {
		o = *opts
	}
	overwrite := o.Overwrite
	o.BulkLoad, o.Overwrite = true, false // Overwrite false: the temporary name is created exclusively
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
	}
	var tmp string
	var v *FS
	for range 100 {
		tmp = durable.TempName(path)
		if v, err = Create(tmp, size, &o); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			os.Remove(tmp) // a half-formatted file of ours
		}
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o644); err != nil { // as Create asks, whatever the umask
		v.Close()
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := fill(v); err != nil {
		v.Close()
		return err
	}
	if err := v.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := durable.Publish(tmp, path, durable.Options{NoReplace: !overwrite, Synced: true}); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}
