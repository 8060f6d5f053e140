//go:build !unix

package durable

import (
	"io/fs"
	"os"
	"runtime"
)

// dirSync: a directory cannot be opened for sync on Windows; NTFS
// journals a rename itself.
const dirSync = runtime.GOOS != "windows"

// OpenFile is os.OpenFile (see open_unix.go).
func OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// openForSync opens a file for fsync: FlushFileBuffers wants write access.
func openForSync(name string) (*os.File, error) { return os.OpenFile(name, os.O_RDWR, 0) }

// settle fsyncs f, then sets its permission bits (on Windows only the
// read-only attribute, set last since it would forbid the flush).
func settle(f *os.File, perm fs.FileMode) error {
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Chmod(perm)
}
