package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/erofs"
)

// Cache is a content-addressed store in one directory. Its methods are safe
// for concurrent use by goroutines and by processes sharing the directory.
type Cache struct {
	dir string
}

const (
	objectsDir = "objects"
	locksDir   = "locks"
	tmpDir     = "tmp"
	indexFile  = "index.json"
	indexLock  = "index.lock"
	gcLock     = "gc.lock"
	lockSuffix = ".lock"
	maxNameLen = 64 + 1 + 32
)

// Open returns the cache in dir, creating its directories (mode 0755) if
// needed. What is in a cache is trusted (an image's bytes become a
// sandbox's root file system), so the cache's directories must be real
// directories (the cache's own directory may be a symlink to one) owned by
// the caller or by root, and writable by no one else (they may be
// readable: root's cache is shared read-only); Open refuses any other,
// with an error wrapping ErrUnsafe and *privdir.Error that names the
// directory and the fix, so that another user who made the directory
// first cannot plant objects in it.
func Open(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("cache: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	dirs := []string{abs, filepath.Join(abs, objectsDir), filepath.Join(abs, locksDir), filepath.Join(abs, tmpDir)}
	for i, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		if err := checkDir(d, i == 0); err != nil {
			return nil, err
		}
	}
	return &Cache{dir: abs}, nil
}

// Dir returns the cache's absolute directory.
func (c *Cache) Dir() string { return c.dir }

// TempDir returns a directory on the cache's filesystem for builders to
// spool data in. GC empties it, so use it only while holding a Pin.
func (c *Cache) TempDir() string { return filepath.Join(c.dir, tmpDir) }

// ValidName reports whether name is an object name: 64 lowercase hex
// digits (a sha256), a dot and an extension of lowercase letters, digits
// and dots that neither starts nor ends with a dot ("….erofs",
// "….config.json").
func ValidName(name string) bool {
	if len(name) < 66 || len(name) > maxNameLen || name[64] != '.' {
		return false
	}
	for i := 0; i < 64; i++ {
		if c := name[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	ext := name[65:]
	if ext[0] == '.' || ext[len(ext)-1] == '.' {
		return false
	}
	for i := 0; i < len(ext); i++ {
		c := ext[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '.' && ext[i-1] != '.') {
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return nil
}

// Path returns where object name lives (whether or not it exists yet).
func (c *Cache) Path(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return filepath.Join(c.dir, objectsDir, name), nil
}

// Lookup returns the path of object name, or an error wrapping ErrNotExist,
// or one wrapping ErrUnsafe when the object is not a regular file of the
// cache's owner (or root) writable by no one else.
func (c *Cache) Lookup(name string) (string, error) {
	p, err := c.Path(name)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w: %s", ErrNotExist, name)
		}
		return "", fmt.Errorf("cache: %w", err)
	}
	if err := checkObject(p, fi); err != nil {
		return "", err
	}
	return p, nil
}

// Pin holds the cache's collector lock shared: GC waits until every Pin is
// closed, so what a holder builds, spools and indexes is never collected
// under it. Build objects and add the index entries naming them under the
// same Pin.
type Pin struct {
	c *Cache
	l *fileLock
}

// Pin takes the collector lock shared; it blocks while GC runs.
func (c *Cache) Pin() (*Pin, error) {
	l, err := lock(filepath.Join(c.dir, gcLock), false)
	if err != nil {
		return nil, err
	}
	return &Pin{c: c, l: l}, nil
}

// Close releases the pin. It is safe to call twice.
func (p *Pin) Close() error { return p.l.unlock() }

// Ensure returns the path of object name, building it first with write if
// it is missing. write fills a temporary file in the objects directory;
// Ensure then fsyncs it and renames it into place (erofs.WriteFileAtomic).
// If several goroutines or processes ask for the same missing object, one
// runs write (created is true for it) and the others wait and get the same
// path. When write fails nothing is published and the next caller tries
// again. Objects are published read-only (0444); one found that is not a
// regular file of the cache's owner (or root) writable by no one else (see
// Lookup) is removed and built again.
func (p *Pin) Ensure(name string, write func(f *os.File) error) (path string, created bool, err error) {
	if p.l == nil || p.l.f == nil {
		return "", false, errors.New("cache: Ensure on a closed Pin")
	}
	path, err = p.c.Path(name)
	if err != nil {
		return "", false, err
	}
	if fi, err := os.Lstat(path); err == nil && checkObject(path, fi) == nil {
		return path, false, nil
	}
	l, err := lock(filepath.Join(p.c.dir, locksDir, name+lockSuffix), true)
	if err != nil {
		return "", false, err
	}
	defer l.unlock()
	// Another process may have published it while we waited.
	if fi, err := os.Lstat(path); err == nil {
		if checkObject(path, fi) == nil {
			return path, false, nil
		}
		if err := os.Remove(path); err != nil {
			return "", false, fmt.Errorf("cache: %w", err)
		}
	}
	if err := erofs.WriteFileAtomic(path, write); err != nil {
		return "", false, fmt.Errorf("cache: building %s: %w", name, err)
	}
	// Read-only: nothing writes an object after it is published, and an
	// edit through a hard link to it (someone's copy) fails instead of
	// changing what every episode boots from.
	if err := os.Chmod(path, 0o444); err != nil {
		return "", false, fmt.Errorf("cache: %w", err)
	}
	return path, true, nil
}
