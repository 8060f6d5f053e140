package mounttest

import (
	"os"

	"golang.org/x/sys/unix"
)

// sharedTempDir makes a directory in TMPDIR, bind-mounted on itself with
// shared propagation; "" if it cannot (not root, no CAP_SYS_ADMIN).
func sharedTempDir() (string, func()) {
	if os.Geteuid() != 0 {
		return "", func() {}
	}
	dir, err := os.MkdirTemp("", "gvx-mounts-")
	if err != nil {
		return "", func() {}
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		os.Remove(dir)
		return "", func() {}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.Remove(dir)
		return "", func() {}
	}
	return dir, func() {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.RemoveAll(dir)
	}
}
