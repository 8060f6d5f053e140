//go:build unix

package dindtest

import (
	"io/fs"
	"syscall"
)

// inodeOf identifies a file with more than one link.
func inodeOf(fi fs.FileInfo) (inodeKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return inodeKey{}, false
	}
	return inodeKey{uint64(st.Dev), uint64(st.Ino)}, true //nolint:unconvert // widths differ by OS
}
