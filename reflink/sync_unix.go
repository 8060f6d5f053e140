//go:build unix

package reflink

import (
	"io/fs"
	"os"
)

// syncFile sets name's permission bits and makes it durable.
func syncFile(name string, perm fs.FileMode) error {
	f, err := openFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = f.Chmod(perm)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := openFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
