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

// ownerOf returns the uid owning fi.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// stampOf identifies fi's content as long as nobody writes it (see
// VerifyLayout).
func stampOf(fi fs.FileInfo) blobStamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return blobStamp{}
	}
	return blobStamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: fi.Size(), MTime: fi.ModTime().UnixNano()} //nolint:unconvert // widths differ by OS
}
