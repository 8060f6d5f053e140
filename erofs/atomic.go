package erofs

import (
	"fmt"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/internal/durable"
)

// WriteFileAtomic publishes path with the contents write puts in a
// temporary file beside it: the file is fsynced, renamed over path and the
// directory fsynced, so a crash leaves either the old file or the whole new
// one, never a torn image. On error nothing is left behind.
func WriteFileAtomic(path string, write func(f *os.File) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("erofs: publishing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("erofs: publishing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("erofs: publishing %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("erofs: publishing %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("erofs: publishing %s: %w", path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("erofs: %w", err)
	}
	return nil
}
