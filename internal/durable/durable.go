// Package durable holds the one helper for making a rename durable, so
// every publisher (temp file, fsync, rename, fsync of the directory) ends
// the same way.
package durable

import (
	"fmt"
	"os"
	"runtime"
)

// SyncDir fsyncs directory dir, making a rename or create in it durable.
// On Windows it does nothing: a directory cannot be opened for sync there
// and NTFS journals the rename itself.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}
