//go:build unix

package ext4lite

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			return fmt.Errorf("%s: %w", f.Name(), ErrInUse)
		}
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
}
