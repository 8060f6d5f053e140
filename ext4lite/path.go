package ext4lite

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

var (
	errNotDir   = syscall.ENOTDIR
	errIsDir    = syscall.EISDIR
	errNotEmpty = syscall.ENOTEMPTY
	errTooLong  = syscall.ENAMETOOLONG
	errInvalid  = syscall.EINVAL
	errTooMany  = syscall.EMLINK
	errNoAttr   = syscall.ENODATA
)

// splitPath cleans p (relative or absolute, always from the volume's root)
// into its components. ".." cannot climb above the root.
func splitPath(p string) []string {
	c := path.Clean("/" + p)
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// walk resolves components to an inode without following any symlink; an
// intermediate symlink is sink.ErrSymlinkInPath.
func (v *FS) walk(parts []string) (*inode, error) {
	cur, err := v.getInode(disk.RootIno)
	if err != nil {
		return nil, err
	}
	for i, name := range parts {
		if !cur.isDir() {
			if cur.fileType() == disk.ModeSymlink {
				return nil, sink.ErrSymlinkInPath
			}
			return nil, errNotDir
		}
		d, err := v.loadDir(cur)
		if err != nil {
			return nil, err
		}
		de, ok := d.entries[name]
		if !ok {
			return nil, fs.ErrNotExist
		}
		next, err := v.getInode(de.ino)
		if err != nil {
			return nil, err
		}
		if next.d.LinksCount == 0 && !next.isDir() {
			return nil, corruptf(-1, de.ino, "directory entry %q points at a deleted inode", strings.Join(parts[:i+1], "/"))
		}
		cur = next
	}
	return cur, nil
}

// lookup resolves p to its inode.
func (v *FS) lookup(p string) (*inode, error) { return v.walk(splitPath(p)) }

// parentOf resolves the directory holding p's last component.
func (v *FS) parentOf(p string) (*inode, *dir, string, error) {
	parts := splitPath(p)
	if len(parts) == 0 {
		return nil, nil, "", errInvalid // the root has no parent entry
	}
	name := parts[len(parts)-1]
	if len(name) > disk.MaxNameLen {
		return nil, nil, "", errTooLong
	}
	pin, err := v.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, nil, "", err
	}
	if !pin.isDir() {
		if pin.fileType() == disk.ModeSymlink {
			return nil, nil, "", sink.ErrSymlinkInPath
		}
		return nil, nil, "", errNotDir
	}
	d, err := v.loadDir(pin)
	if err != nil {
		return nil, nil, "", err
	}
	return pin, d, name, nil
}

// isNotExist reports fs.ErrNotExist through wrapping.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
