package reflink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// cloneNew creates the file name as a clone of src with FICLONE, then,
// while it is open, gives it perm and (with sync) makes it durable: the
// file that gets the mode is the one cloned into, never whatever the name
// in a shared directory holds by then, in two to four calls fewer than
// doing both by name afterwards. A raw descriptor, not durable.OpenFile's
// *os.File, whose os.NewFile asks fcntl for flags nobody reads here.
// settled says it did; the other systems' cloneNew leave that to finish.
//
// On XFS the fsync waits for the rename instead (late, the descriptor
// still open): XFS journals all metadata in one log, in commit order, and
// recovers a prefix of it, so the clone's remap and mode, committed before
// the rename, are in any state a crash leaves that holds the rename: the
// name never comes back without the whole clone. The fsync after the
// rename then writes the log once for both, and the directory's fsync
// finds nothing left to write: one log write where the fsync before the
// rename made two (TestDurableCloneLogWrites). Both fsyncs are still
// made before CloneFile returns. A copy (finish) keeps the fsync before
// the rename: its data is not in the log.
func cloneNew(src *os.File, name string, perm fs.FileMode, sync bool) (settled bool, late func(sync bool) error, err error) {
	var fd int
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return false, nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	op := "ioctl FICLONE"
	err = ignoringEINTR(func() error { return unix.IoctlFileClone(fd, int(src.Fd())) })
	if err == nil {
		op = "chmod"
		err = ignoringEINTR(func() error { return unix.Fchmod(fd, uint32(perm.Perm())) })
	}
	if err == nil && sync {
		var st unix.Statfs_t
		if unix.Fstatfs(fd, &st) == nil && uint32(st.Type) == unix.XFS_SUPER_MAGIC {
			return true, func(sync bool) error {
				var err error
				if sync {
					err = ignoringEINTR(func() error { return unix.Fsync(fd) })
				}
				if cerr := unix.Close(fd); err == nil {
					err = cerr
				}
				return err
			}, nil
		}
		op = "fsync"
		err = ignoringEINTR(func() error { return unix.Fsync(fd) })
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		op, err = "close", cerr
	}
	if err != nil {
		return false, nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return true, nil, nil
}

// CloneRange makes n bytes of dst at dstOff share the extents of src at
// srcOff (Linux FICLONERANGE, Windows FSCTL_DUPLICATE_EXTENTS_TO_FILE). The
// offsets and n must be multiples of the filesystem's block size, except
// that a range may end at src's end of file. n == 0 means "to the end of
// src". It never copies: a filesystem that cannot clone gives an error
// wrapping ErrNotSupported; on macOS, which has no range clone, it always
// does.
func CloneRange(dst, src *os.File, dstOff, srcOff, n int64) error {
	if dstOff < 0 || srcOff < 0 || n < 0 {
		return fmt.Errorf("reflink: negative offset or length")
	}
	arg := unix.FileCloneRange{
		Src_fd:      int64(src.Fd()),
		Src_offset:  uint64(srcOff),
		Src_length:  uint64(n),
		Dest_offset: uint64(dstOff),
	}
	err := ignoringEINTR(func() error { return unix.IoctlFileCloneRange(int(dst.Fd()), &arg) })
	if err == nil {
		return nil
	}
	if isNotSupported(err) {
		return notSupported(src.Name(), dst.Name(), err)
	}
	return wrapErr(src.Name(), dst.Name(), &fs.PathError{Op: "ioctl FICLONERANGE", Path: dst.Name(), Err: err})
}

// isNotSupported tells whether a clone failed because it cannot work here
// (coreutils' cp falls back to copying on the same errors), as opposed to a
// real failure such as ENOSPC or EIO.
func isNotSupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) ||
		errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSYS)
}

func isCrossDevice(err error) bool { return errors.Is(err, unix.EXDEV) }

func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// fsMagic names the filesystems users are likely to meet (statfs f_type).
var fsMagic = map[uint32]string{
	unix.XFS_SUPER_MAGIC:       "xfs",
	unix.BTRFS_SUPER_MAGIC:     "btrfs",
	unix.BCACHEFS_SUPER_MAGIC:  "bcachefs",
	unix.OCFS2_SUPER_MAGIC:     "ocfs2",
	unix.EXT4_SUPER_MAGIC:      "ext4",
	unix.TMPFS_MAGIC:           "tmpfs",
	unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
	unix.F2FS_SUPER_MAGIC:      "f2fs",
	unix.SMB2_SUPER_MAGIC:      "smb",
	unix.CIFS_SUPER_MAGIC:      "cifs",
	unix.V9FS_MAGIC:            "9p",
	unix.SQUASHFS_MAGIC:        "squashfs",
	unix.RAMFS_MAGIC:           "ramfs",
	0x2fc12fc1:                 "zfs",
	0x6e736664:                 "virtiofs",
}

func fsTypeName(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return ""
	}
	if n, ok := fsMagic[uint32(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("statfs type %#x", uint32(st.Type))
}

func ignoringEINTR(f func() error) error {
	for {
		err := f()
		if err != unix.EINTR {
			return err
		}
	}
}
