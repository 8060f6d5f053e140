//go:build unix

package cache

import (
	"io/fs"
	"os"
	"syscall"
)

// ownerOK reports whether fi belongs to the caller or to root, and its
// owner's uid.
func ownerOK(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, true
	}
	uid := int(st.Uid)
	return uid, uid == os.Geteuid() || uid == 0
}
