package ext4lite

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// PunchHole deallocates [off, off+n) (FALLOC_FL_PUNCH_HOLE).
func (f fileDevice) PunchHole(off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return errPunchUnsupported
	}
	return err
}

// Allocated is the file's st_blocks in bytes.
func (f fileDevice) Allocated() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return -1, err
	}
	return st.Blocks * 512, nil
}
