//go:build unix

package reflink

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openFile is os.OpenFile without the runtime's poller: os.OpenFile sets
// up epoll (a descriptor, an eventfd and a thread to wait on them) at a
// process's first open and tries to register every file with it, which
// for a regular file only fails. A whole-process clone opens two files
// and a directory; that set-up was a tenth of its time (bench/clone.sh).
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}
