//go:build !unix

package reflink

import (
	"io/fs"
	"os"
)

// openFile is os.OpenFile (see open_unix.go).
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
