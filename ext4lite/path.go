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
	return v.walkFrom(disk.RootIno, parts)
}

// walkFrom is walk starting at directory inode start.
func (v *FS) walkFrom(start uint32, parts []string) (*inode, error) {
	cur, err := v.getInode(start)
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

// lastDir remembers the directory the path API resolved last, so the next
// path below it (an export's or an import's next entry, a walk's children)
// resolves from there: a tree of depth D is walked in time linear in its
// paths' length, not D² lookups and allocations. Any change that could make
// the path mean another inode (unlink, rename, exchange, a reload of the
// caches) forgets it (forgetPaths).
type lastDir struct {
	path string // clean path, never "."
	ino  uint32
}

// forgetPaths drops the lastDir cache; called wherever a directory entry
// is removed or re-pointed.
func (v *FS) forgetPaths() { v.last = lastDir{} }

// resolve resolves clean path p (already split-checked by the caller, ""
// for the root) starting from lastDir when p lies below it.
func (v *FS) resolve(p string) (*inode, error) {
	start, rest := uint32(disk.RootIno), p
	if l := v.last; l.ino != 0 && len(p) > len(l.path) && p[len(l.path)] == '/' && p[:len(l.path)] == l.path {
		start, rest = l.ino, p[len(l.path)+1:]
	} else if p == l.path && l.ino != 0 {
		return v.getInode(l.ino)
	}
	var parts []string
	if rest != "" {
		parts = strings.Split(rest, "/")
	}
	in, err := v.walkFrom(start, parts)
	if err == nil && in.isDir() && p != "" {
		v.last = lastDir{path: p, ino: in.ino}
	}
	return in, err
}

// ValidPath reports whether p is in the form the path API takes: "." for
// the root, else slash-separated elements relative to the root, none empty,
// "." or "..", none holding a NUL. It is io/fs.ValidPath without the demand
// that names be UTF-8: an ext4 name is any bytes but "/" and NUL, and a
// guest (or a Latin-1 test fixture) makes such names through the inode
// API; refused here, one would make every path verb over its directory
// fail (ls, export, copy).
func ValidPath(p string) bool {
	if p == "." {
		return true
	}
	for {
		i := strings.IndexByte(p, '/')
		elem := p
		if i >= 0 {
			elem = p[:i]
		}
		if elem == "" || elem == "." || elem == ".." || strings.IndexByte(elem, 0) >= 0 {
			return false
		}
		if i < 0 {
			return true
		}
		p = p[i+1:]
	}
}

// lookup resolves p to its inode. Paths follow the sink contract:
// slash-separated, relative to the volume's root, already clean, "." for
// the root (ValidPath). Anything else is refused, so no two spellings reach
// the same entry and nothing can climb above the root. CleanPath turns a
// user's path ("/etc/", "a//b") into this form.
func (v *FS) lookup(p string) (*inode, error) {
	if p == "." {
		return v.getInode(disk.RootIno)
	}
	if !ValidPath(p) {
		return nil, errInvalid
	}
	return v.resolve(p)
}

// parentOf resolves the directory holding p's last component.
func (v *FS) parentOf(p string) (*inode, *dir, string, error) {
	if p == "." || !ValidPath(p) {
		return nil, nil, "", errInvalid // the root has no parent entry
	}
	dirPath, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dirPath, name = p[:i], p[i+1:]
	}
	if len(name) > disk.MaxNameLen {
		return nil, nil, "", errTooLong
	}
	pin, err := v.resolve(dirPath)
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

// lookupFor resolves p for the path operation op, with v.mu held: ErrClosed
// after Close, else lookup's error as a *fs.PathError naming op and p.
func (v *FS) lookupFor(op, p string) (*inode, error) {
	if v.closed {
		return nil, ErrClosed
	}
	in, err := v.lookup(p)
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	return in, nil
}
