//go:build !linux

package ext4lite

// PunchHole is not implemented here: Compact zeroes free space instead.
func (f fileDevice) PunchHole(off, n int64) error { return errPunchUnsupported }

// Allocated is not known here.
func (f fileDevice) Allocated() (int64, error) { return -1, nil }
