package hostdir

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"syscall"

	"z.gfire.dev/gvx/sink"
)

// Dir is a host directory seen as a sink.Sink and a sink.Source. Its zero
// value is not usable; call New.
type Dir struct {
	root  string
	cache *dirCache // the last parent directory walked to, kept open
	devs  devIndex  // Linux: Ino made distinct across mounts
}

// New returns the tree rooted at the existing directory root. The root path
// itself is resolved by the OS (it may be reached through symlinks); nothing
// below it ever is. Close releases the one directory handle a Dir keeps
// open (an unreachable Dir releases it too).
func New(root string) *Dir {
	d := &Dir{root: root, cache: newDirCache()}
	runtime.AddCleanup(d, func(c *dirCache) { c.drop() }, d.cache)
	return d
}

// Close releases the directory handle the Dir caches. The Dir stays
// usable.
func (d *Dir) Close() error {
	d.cache.drop()
	return nil
}

// Root returns the host path of the tree's root.
func (d *Dir) Root() string { return d.root }

var (
	_ sink.Sink   = (*Dir)(nil)
	_ sink.Source = (*Dir)(nil)
)

// errNotDir reports an intermediate component that is not a directory.
var errNotDir = errors.New("not a directory")

// split checks p against the sink package's path rules and returns its
// elements; the root "." has none.
func split(op, p string) ([]string, error) {
	if p == "." {
		return nil, nil
	}
	bad := p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/")
	el := strings.Split(p, "/")
	for _, e := range el {
		if e == "" || e == "." || e == ".." || strings.ContainsRune(e, 0) {
			bad = true
		}
	}
	if bad {
		return nil, &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid}
	}
	return el, nil
}

// wrap turns a system error into a *fs.PathError, marking "the filesystem
// cannot store this" as sink.ErrUnsupported.
func wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		err = fmt.Errorf("%w: %w", sink.ErrUnsupported, err)
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}
