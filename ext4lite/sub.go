package ext4lite

import (
	"io"

	"z.gfire.dev/gvx/sink"
)

// Tree is a directory of a volume seen as the root of a tree: it
// implements sink.Sink and sink.Source with paths relative to that
// directory (e.g. `gvx-vol import --dest PATH`, or a test that wants an
// empty root without lost+found).
type Tree struct {
	v    *FS
	base string
}

// Sub returns the tree rooted at directory dir ("." for the volume root).
func (v *FS) Sub(dir string) (*Tree, error) {
	h, err := v.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if h.Type() != sink.TypeDir {
		return nil, pathErr("sub", dir, errNotDir)
	}
	return &Tree{v: v, base: dir}, nil
}

func (t *Tree) join(p string) string {
	if t.base == "." {
		return p
	}
	if p == "." {
		return t.base
	}
	if !ValidPath(p) {
		return "/invalid/" // refused by lookup
	}
	return t.base + "/" + p
}

func (t *Tree) fix(h *sink.Header) *sink.Header {
	c := *h
	c.Path = t.join(h.Path)
	return &c
}

// Mkdir implements sink.Sink.
func (t *Tree) Mkdir(h *sink.Header) error { return t.v.Mkdir(t.fix(h)) }

// WriteFile implements sink.Sink.
func (t *Tree) WriteFile(h *sink.Header, r io.Reader) error { return t.v.WriteFile(t.fix(h), r) }

// Symlink implements sink.Sink.
func (t *Tree) Symlink(h *sink.Header) error { return t.v.Symlink(t.fix(h)) }

// Mknod implements sink.Sink.
func (t *Tree) Mknod(h *sink.Header) error { return t.v.Mknod(t.fix(h)) }

// Link implements sink.Sink.
func (t *Tree) Link(oldname, newname string) error {
	return t.v.Link(t.join(oldname), t.join(newname))
}

// RemoveAll implements sink.Sink.
func (t *Tree) RemoveAll(p string) error { return t.v.RemoveAll(t.join(p)) }

// Lstat implements sink.Source.
func (t *Tree) Lstat(p string) (*sink.Header, error) {
	h, err := t.v.Lstat(t.join(p))
	if err == nil {
		h.Path = p
	}
	return h, err
}

// ReadDir implements sink.Source.
func (t *Tree) ReadDir(p string) ([]string, error) { return t.v.ReadDir(t.join(p)) }

// Open implements sink.Source.
func (t *Tree) Open(p string) (io.ReadCloser, error) { return t.v.Open(t.join(p)) }

// DataRegions implements sink.DataMapper.
func (t *Tree) DataRegions(p string) ([]sink.Region, error) { return t.v.DataRegions(t.join(p)) }
