//go:build unix

package durable

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

const dirSync = true

// OpenFile is os.OpenFile without the runtime's poller: os.OpenFile sets
// up epoll (a descriptor, an eventfd and a thread to wait on them) at a
// process's first open and tries to register every file with it, which
// for a regular file or a directory only fails. A whole-process clone
// opens two files and a directory; that set-up was a tenth of its time
// (bench/clone.sh).
func OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openForSync opens a file or a directory for fsync: read-only does.
func openForSync(name string) (*os.File, error) { return OpenFile(name, os.O_RDONLY, 0) }

// settle sets f's permission bits, then fsyncs it (the one fsync covers
// both).
func settle(f *os.File, perm fs.FileMode) error {
	if err := f.Chmod(perm); err != nil {
		return err
	}
	return f.Sync()
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
