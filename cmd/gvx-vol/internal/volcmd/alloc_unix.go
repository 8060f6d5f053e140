//go:build unix

package volcmd

import (
	"os"
	"syscall"
)

// allocatedBytes is the space the file takes on the host (st_blocks).
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return -1
}
