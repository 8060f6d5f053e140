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

// splitPath splits a volume path into its components. Paths follow the
// sink contract (and io/fs): slash-separated, relative to the volume's
// root, already clean, "." for the root. Anything else is refused, so no
// two spellings reach the same entry and nothing can climb above the root.
// CleanPath turns a user's path ("/etc/", "a//b") into this form.
func splitPath(p string) ([]string, error) {
	if p == "." {
		return nil, nil
	}
	if !fs.ValidPath(p) {
		return nil, errInvalid
	}
	return strings.Split(p, "/"), nil
}

// CleanPath converts a user-supplied path (absolute or relative, with
// redundant slashes or dots) into the clean relative form the path API
// takes. ".." never climbs above the root.
func CleanPath(p string) string {
	c := path.Clean("/" + p)
	if c == "/" {
		return "."
	}
	return c[1:]
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
func (v *FS) lookup(p string) (*inode, error) {
	parts, err := splitPath(p)
	if err != nil {
		return nil, err
	}
	return v.walk(parts)
}

// parentOf resolves the directory holding p's last component.
func (v *FS) parentOf(p string) (*inode, *dir, string, error) {
	parts, err := splitPath(p)
	if err != nil {
		return nil, nil, "", err
	}
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
