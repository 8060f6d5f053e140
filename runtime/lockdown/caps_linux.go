package lockdown

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DropCaps leaves only keep in the effective and permitted sets of every
// thread (capabilities are per thread): the bounding set is cleared of
// everything else where CAP_SETPCAP allows it, the ambient and inheritable
// sets are emptied. Without capabilities (an unprivileged caller on the
// host) there is nothing to drop and it succeeds.
func DropCaps(keep []uintptr) error {
	var hdr unix.CapUserHeader
	var data [2]unix.CapUserData
	hdr.Version = unix.LINUX_CAPABILITY_VERSION_3
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	var want [2]uint32
	for _, c := range keep {
		want[c/32] |= 1 << (c % 32)
	}
	held := data[0].Permitted|data[1].Permitted|data[0].Inheritable|data[1].Inheritable != 0
	if held && data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := uintptr(0); c < 64; c++ {
			if want[c/32]&(1<<(c%32)) != 0 {
				continue
			}
			if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); e != 0 {
				if e == unix.EINVAL {
					break // past the kernel's last capability
				}
				return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, e)
			}
		}
	}
	if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 && e != unix.EINVAL {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", e)
	}
	if !held {
		return nil
	}
	for i := range data {
		data[i].Effective &= want[i]
		data[i].Permitted &= want[i]
		data[i].Inheritable = 0
	}
	hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
