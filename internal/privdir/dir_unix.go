//go:build unix

package privdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Dir is a trusted directory held open: it was opened without following a
// symlink and judged by its descriptor, and its files are opened through
// that descriptor, each without following a symlink and judged the same
// way (a regular file, owned as the rule says, writable by no one else).
// Nothing is looked up by path again, so a name swapped after the check
// (a symlink to another user's file, say) is refused, not followed.
type Dir struct {
	fd   int
	path string
	want Want
}

// Open opens the directory at path and checks it against w.
func (w Want) Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, w.Check(path) // names what it is instead
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := w.CheckFD(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Dir{fd: fd, path: path, want: w}, nil
}

// Open opens a directory of the caller's as Want{}.Open does.
func Open(path string) (*Dir, error) { return Want{}.Open(path) }

// Path is the directory's path as given to Open.
func (d *Dir) Path() string { return d.path }

// Close releases the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// OpenFile opens the regular file name in d for reading, refusing a
// symlink, anything but a regular file, and a file the rule refuses.
func (d *Dir) OpenFile(name string) (*os.File, error) {
	p := filepath.Join(d.path, name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, &Error{Path: p, Why: "is a symlink", Want: d.want, Self: os.Geteuid(), File: true}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &Error{Path: p, Why: "is not a regular file", Want: d.want, Self: os.Geteuid(), File: true}
	}
	perm := os.FileMode(st.Mode) & os.ModePerm
	if w := (Want{Root: d.want.Root}); !w.ok(int(st.Uid), perm, os.Geteuid()) {
		unix.Close(fd)
		return nil, &Error{Path: p, UID: int(st.Uid), Mode: perm, Want: w, Self: os.Geteuid(), File: true}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// ReadFile reads the file name in d as OpenFile opens it, refusing one of
// more than max bytes.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", f.Name(), max)
	}
	return b, nil
}
