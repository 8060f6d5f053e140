package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"z.gfire.dev/gvx/internal/privdir"
)

// checkDir refuses a cache directory another local user could write into:
// one owned by someone other than the caller or root, one writable by group
// or others, or (below the cache's own directory, which an administrator
// may point elsewhere with a symlink) a symlink. Anyone who can write
// there can swap the root filesystem every later episode boots from.
func checkDir(p string, follow bool) error {
	q := p
	if follow {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			q = r
		}
	}
	if err := (privdir.Want{Root: true}).Check(q); err != nil {
		var pe *privdir.Error
		if errors.As(err, &pe) {
			return fmt.Errorf("%w: %w; what is in a cache is trusted: remove it (or chmod go-w it if it is yours), or use another cache directory ($GVX_CACHE_DIR; rungv --cache-dir, gvx-vol --cache)", ErrUnsafe, err)
		}
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// checkObject refuses an object that is not a plain file of the cache's
// owner (or root) writable by no one else: objects are published by rename
// and never written afterwards.
func checkObject(name string, fi fs.FileInfo) error {
	return checkFile(name, fi, "remove it: the next add builds it again")
}

// checkFile is checkObject for any file of the cache, with the fix to name.
func checkFile(name string, fi fs.FileInfo, fix string) error {
	why := ""
	uid, owner := ownerOK(fi)
	switch {
	case !fi.Mode().IsRegular():
		why = fmt.Sprintf("is a %v, not a regular file", fi.Mode().Type())
	case !owner:
		why = fmt.Sprintf("is owned by uid %d", uid)
	case fi.Mode().Perm()&0o022 != 0:
		why = fmt.Sprintf("has mode %#o (writable by group or others)", fi.Mode().Perm())
	}
	if why != "" {
		return fmt.Errorf("%w: %s %s; %s", ErrUnsafe, name, why, fix)
	}
	return nil
}
