//go:build unix

package privdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Socket identifies the socket file ListenUnix made: its device and inode
// stay the same across the rename into place.
type Socket struct {
	Dev, Ino uint64
}

// ListenUnix listens on a new unix socket at path with permission mode.
// The socket is bound inside a private directory it makes next to path
// (mode 0700, checked to be the caller's through its descriptor), given
// its mode there, where no one else can reach it, and renamed into place;
// the directory is then removed. A user who may write path's directory can
// neither connect while the mode is looser nor swap the socket for a
// symlink to have the mode set on another file.
//
// Nothing at path is replaced: the caller removes a stale socket first.
// Something at path, or put there meanwhile, is an error wrapping
// os.ErrExist. The listener does not unlink path on Close.
func ListenUnix(path string, mode os.FileMode) (_ *net.UnixListener, _ Socket, err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	pfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, Socket{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(pfd)
	name, err := mkdirTemp(pfd)
	if err != nil {
		return nil, Socket{}, &os.PathError{Op: "mkdir", Path: filepath.Join(dir, ".gvx-sock-*"), Err: err}
	}
	tmp := filepath.Join(dir, name)
	// The name may have been swapped since the mkdir (the directory is
	// someone else's to rename in); what is opened is judged.
	tfd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
		return nil, Socket{}, &os.PathError{Op: "open", Path: tmp, Err: err}
	}
	defer unix.Close(tfd)
	var st unix.Stat_t
	if err := unix.Fstat(tfd, &st); err != nil {
		return nil, Socket{}, &os.PathError{Op: "fstat", Path: tmp, Err: err}
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o077 != 0 {
		return nil, Socket{}, fmt.Errorf("%s was replaced (owner uid %d, mode %04o) while a socket was made in it: someone else can write %s; publish the socket elsewhere", tmp, st.Uid, st.Mode&0o7777, dir)
	}
	const sock = "s"
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(tfd, sock, 0)
		}
		// Empty by now, unless the name was swapped: then rmdir fails.
		_ = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
	}()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: bindAddr(tfd, tmp, sock), Net: "unix"})
	if err != nil {
		return nil, Socket{}, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := unix.Fchmodat(tfd, sock, uint32(mode.Perm()), 0); err != nil {
		return nil, Socket{}, &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	if err := unix.Fstatat(tfd, sock, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, Socket{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	id := Socket{Dev: uint64(st.Dev), Ino: st.Ino}
	err = renameNoReplace(tfd, sock, pfd, base)
	if errors.Is(err, unix.EEXIST) {
		return nil, Socket{}, fmt.Errorf("%s: %w (something was put there while the socket was made)", path, os.ErrExist)
	}
	if err != nil {
		return nil, Socket{}, &os.PathError{Op: "rename", Path: path, Err: err}
	}
	return l, id, nil
}

// renameCheck renames without replacing where the kernel or filesystem
// cannot: it checks, then renames.
func renameCheck(olddfd int, old string, newdfd int, new string) error {
	var st unix.Stat_t
	err := unix.Fstatat(newdfd, new, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		return unix.EEXIST
	}
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	return unix.Renameat(olddfd, old, newdfd, new)
}

// mkdirTemp makes a new directory of a random name, mode 0700, in the
// directory open as dfd.
func mkdirTemp(dfd int) (string, error) {
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := ".gvx-sock-" + hex.EncodeToString(b[:])
		err := unix.Mkdirat(dfd, name, 0o700)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
	}
	return "", unix.EEXIST
}
