package sink

import (
	"fmt"
)

// Copy writes the whole tree of src into dst: every entry with its
// metadata, hard links recreated from shared Ino values, and each
// directory's metadata applied again after its children so directory
// mtimes survive. The root's metadata is copied too. Copy does not call
// dst's Finish. Each directory is entered once: a directory src shows
// twice (a hard link to a directory, which only a corrupt or crafted
// volume or image has) stops the copy with a *DirLinkError, so a cycle or
// a shared subtree cannot make it endless or exponential.
func Copy(dst Sink, src Source) error {
	c := copier{dst: dst, src: src, links: map[uint64]string{}, dirs: DirSet{}}
	return c.dir(".")
}

type copier struct {
	dst   Sink
	src   Source
	links map[uint64]string // Ino → first path written, for Nlink > 1
	dirs  DirSet
}

func (c *copier) dir(p string) error {
	h, err := c.src.Lstat(p)
	if err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	if h.Type() != TypeDir {
		return fmt.Errorf("sink: copy: %s is not a directory", p)
	}
	if err := c.dirs.Enter(p, h); err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	// Writable first, so children can be made; exact metadata last.
	first := *h
	first.Mode = TypeDir | h.Mode&ModePerm | 0o700
	first.Xattrs = nil
	if err := c.dst.Mkdir(&first); err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	names, err := c.src.ReadDir(p)
	if err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	for _, n := range names {
		cp := n
		if p != "." {
			cp = p + "/" + n
		}
		if err := c.entry(cp); err != nil {
			return err
		}
	}
	if err := c.dst.Mkdir(h); err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	return nil
}

func (c *copier) entry(p string) error {
	h, err := c.src.Lstat(p)
	if err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	if h.Type() == TypeDir {
		return c.dir(p)
	}
	if h.Nlink > 1 {
		if first, ok := c.links[h.Ino]; ok {
			if err := c.dst.Link(first, p); err != nil {
				return fmt.Errorf("sink: copy: %w", err)
			}
			return nil
		}
		c.links[h.Ino] = p
	}
	switch h.Type() {
	case TypeReg:
		r, oerr := c.src.Open(p)
		if oerr != nil {
			return fmt.Errorf("sink: copy: %w", oerr)
		}
		err = c.dst.WriteFile(h, r) // the outer err: checked below
		r.Close()
	case TypeSymlink:
		err = c.dst.Symlink(h)
	case TypeChar, TypeBlock, TypeFifo, TypeSocket:
		err = c.dst.Mknod(h)
	default:
		err = fmt.Errorf("%s: unknown file type %o: %w", p, h.Type(), ErrUnsupported)
	}
	if err != nil {
		return fmt.Errorf("sink: copy: %w", err)
	}
	return nil
}
