package privdir

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindAddr is the address to bind name in the directory open as dfd
// (named dir): through the descriptor, so no name on the way can be
// swapped, and short whatever dir's length.
func bindAddr(dfd int, dir, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name
}

func renameNoReplace(olddfd int, old string, newdfd int, new string) error {
	err := unix.Renameat2(olddfd, old, newdfd, new, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return renameCheck(olddfd, old, newdfd, new) // no RENAME_NOREPLACE here
	}
	return err
}
