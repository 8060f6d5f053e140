//go:build unix

package privdir

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Check refuses path unless it is a directory (not a symlink to one) that
// meets w. The directory is opened without following a symlink and the
// descriptor is stat'ed, so what is judged is what the path named.
func (w Want) Check(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			var st unix.Stat_t
			if unix.Lstat(path, &st) == nil {
				why := "is not a directory"
				if st.Mode&unix.S_IFMT == unix.S_IFLNK {
					why = "is a symlink"
				}
				return &Error{Path: path, Why: why, Want: w, Self: os.Geteuid()}
			}
		}
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return w.judge(path, int(st.Uid), os.FileMode(st.Mode)&os.ModePerm)
}

// CheckFD judges the directory open as fd (named path in errors).
func (w Want) CheckFD(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &Error{Path: path, Why: "is not a directory", Want: w, Self: os.Geteuid()}
	}
	return w.judge(path, int(st.Uid), os.FileMode(st.Mode)&os.ModePerm)
}

// judge applies w to a directory owned by uid with permission bits perm.
func (w Want) judge(path string, uid int, perm os.FileMode) error {
	self := os.Geteuid()
	if w.ok(uid, perm, self) {
		return nil
	}
	return &Error{Path: path, UID: uid, Mode: perm, Want: w, Self: self}
}
