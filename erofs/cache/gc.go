package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GCResult says what GC removed.
type GCResult struct {
	// Removed lists the objects removed, by name.
	Removed []string `json:"removed"`
	// Bytes is the total size of the removed objects.
	Bytes int64 `json:"bytes"`
	// Leftovers counts temporary, spool and lock files of finished or
	// crashed builders that were removed too.
	Leftovers int `json:"leftovers"`
}

// GC removes every object that no index entry names, and what builders
// left behind. It waits until no Pin is held and blocks new ones while it
// runs.
func (c *Cache) GC() (*GCResult, error) {
	gl, err := lock(filepath.Join(c.dir, gcLock), true)
	if err != nil {
		return nil, err
	}
	defer gl.unlock()
	il, err := lock(filepath.Join(c.dir, indexLock), true)
	if err != nil {
		return nil, err
	}
	defer il.unlock()
	ix, err := c.Index()
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, e := range ix.Entries {
		for _, o := range e.Objects {
			keep[o] = true
		}
	}
	res := &GCResult{}
	objs := filepath.Join(c.dir, objectsDir)
	ents, err := os.ReadDir(objs)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(objs, name)
		switch {
		case ValidName(name):
			if keep[name] {
				continue
			}
			var size int64
			if fi, err := de.Info(); err == nil {
				size = fi.Size()
			}
			if err := removeFile(p); err != nil {
				return res, err
			}
			res.Removed = append(res.Removed, name)
			res.Bytes += size
		case strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-"):
			// No Pin is held, so no builder is writing it.
			if err := removeFile(p); err != nil {
				return res, err
			}
			res.Leftovers++
		}
	}
	for _, sub := range []string{locksDir, tmpDir} {
		d := filepath.Join(c.dir, sub)
		ents, err := os.ReadDir(d)
		if err != nil {
			return res, fmt.Errorf("cache: %w", err)
		}
		for _, de := range ents {
			if err := os.RemoveAll(filepath.Join(d, de.Name())); err != nil {
				return res, fmt.Errorf("cache: %w", err)
			}
			res.Leftovers++
		}
	}
	return res, nil
}

func removeFile(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
