package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"z.gfire.dev/gvx/erofs"
)

// IndexVersion is the format version written to index.json.
const IndexVersion = 1

// maxIndexSize bounds what ReadIndex reads: 64 MiB is ~100,000 entries.
const maxIndexSize = 64 << 20

// Index maps names (image references, chosen by the caller) to the
// objects they keep alive.
type Index struct {
	Version int              `json:"version"`
	Entries map[string]Entry `json:"entries"`
}

// Entry is one name's record.
type Entry struct {
	// Objects are the object names this entry keeps from GC.
	Objects []string `json:"objects"`
	// Meta is the caller's own data, kept verbatim.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// ParseIndex decodes and validates index.json's bytes: the version must be
// known and every object name valid.
func ParseIndex(b []byte) (*Index, error) {
	ix := &Index{}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: index.json is empty", ErrCorrupt)
	}
	if err := json.Unmarshal(b, ix); err != nil {
		return nil, fmt.Errorf("%w: index.json: %v", ErrCorrupt, err)
	}
	if ix.Version != IndexVersion {
		return nil, fmt.Errorf("%w: index.json has version %d, want %d", ErrCorrupt, ix.Version, IndexVersion)
	}
	if ix.Entries == nil {
		ix.Entries = map[string]Entry{}
	}
	for k, e := range ix.Entries {
		for _, o := range e.Objects {
			if !ValidName(o) {
				return nil, fmt.Errorf("%w: index.json: entry %q names invalid object %q", ErrCorrupt, k, o)
			}
		}
	}
	return ix, nil
}

// Marshal encodes the index deterministically (sorted keys, sorted object
// lists).
func (ix *Index) Marshal() ([]byte, error) {
	out := Index{Version: IndexVersion, Entries: map[string]Entry{}}
	for k, e := range ix.Entries {
		for _, o := range e.Objects {
			if !ValidName(o) {
				return nil, fmt.Errorf("cache: entry %q: %w: %q", k, ErrBadName, o)
			}
		}
		objs := slices.Clone(e.Objects)
		slices.Sort(objs)
		out.Entries[k] = Entry{Objects: slices.Compact(objs), Meta: e.Meta}
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cache: encoding index: %w", err)
	}
	return append(b, '\n'), nil
}

// Index reads the current index without locking (it is replaced
// atomically, so a reader sees one version whole). A missing index is an
// empty one.
func (c *Cache) Index() (*Index, error) {
	f, err := os.Open(filepath.Join(c.dir, indexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &Index{Version: IndexVersion, Entries: map[string]Entry{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	// The file opened must be the plain file there, not one a symlink
	// names, and writable by no one else: it names what episodes boot.
	lfi, err := os.Lstat(f.Name())
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := checkFile(f.Name(), lfi, "remove it (the cache forgets its names: add the images again)"); err != nil {
		return nil, err
	}
	if ffi, err := f.Stat(); err != nil || !os.SameFile(ffi, lfi) {
		return nil, fmt.Errorf("%w: %s changed while it was opened", ErrUnsafe, f.Name())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil {
		return nil, fmt.Errorf("cache: reading index: %w", err)
	}
	if len(b) > maxIndexSize {
		return nil, fmt.Errorf("%w: index.json is larger than %d bytes", ErrCorrupt, maxIndexSize)
	}
	return ParseIndex(b)
}

// Update runs fn on the current index under the index lock and, if fn
// returns nil and changed something, publishes the result atomically. fn
// must not call Update or GC itself.
func (c *Cache) Update(fn func(ix *Index) error) error {
	l, err := lock(filepath.Join(c.dir, indexLock), true)
	if err != nil {
		return err
	}
	defer l.unlock()
	return c.updateLocked(fn)
}

func (c *Cache) updateLocked(fn func(ix *Index) error) error {
	ix, err := c.Index()
	if err != nil {
		return err
	}
	before, err := ix.Marshal()
	if err != nil {
		return err
	}
	if err := fn(ix); err != nil {
		return err
	}
	after, err := ix.Marshal()
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) {
		return nil
	}
	return erofs.WriteFileAtomic(filepath.Join(c.dir, indexFile), func(f *os.File) error {
		_, err := f.Write(after)
		return err
	})
}
