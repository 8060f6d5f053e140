//go:build unix

package gvx

import (
	"os"
	"syscall"
)

// controlPair is a connected stream socket pair for rungv run
// --control-fd, close-on-exec in this process (ExtraFiles are passed on
// regardless).
func controlPair() (ours, theirs *os.File, err error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control"), nil
}
