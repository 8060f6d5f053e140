//go:build !linux

package hostdir

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"z.gfire.dev/gvx/sink"
)

// On systems other than Linux a Dir does what package os allows: regular
// files, directories and symlinks with mode and times. Owners, devices,
// fifos, sockets and xattrs are refused with sink.ErrUnsupported, and
// intermediate symlinks are detected with Lstat before each operation
// (which, unlike the Linux *at calls, races with concurrent renames).

// dirCache is empty here: there are no *at calls to keep a handle for.
type dirCache struct{}

func newDirCache() *dirCache { return &dirCache{} }
func (c *dirCache) drop()    {}

func unsupported(op, p, what string) error {
	return &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("%w: %s on this OS", sink.ErrUnsupported, what)}
}

// host checks p and every intermediate component, returning the host path.
func (d *Dir) host(op, p string) (string, error) {
	el, err := split(op, p)
	if err != nil {
		return "", err
	}
	cur := d.root
	for i, e := range el {
		cur = filepath.Join(cur, e)
		if i == len(el)-1 {
			break
		}
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", wrap(op, p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", wrap(op, p, fmt.Errorf("%w (at %q)", sink.ErrSymlinkInPath, joinEl(el[:i+1])))
		}
		if !fi.IsDir() {
			return "", wrap(op, p, errNotDir)
		}
	}
	return cur, nil
}

func joinEl(el []string) string {
	s := el[0]
	for _, e := range el[1:] {
		s += "/" + e
	}
	return s
}

func (d *Dir) checkMeta(op string, h *sink.Header) error {
	if len(h.Xattrs) > 0 {
		return unsupported(op, h.Path, "xattrs")
	}
	if h.UID != 0 || h.GID != 0 {
		if err := os.Lchown(filepath.Join(d.root, filepath.FromSlash(h.Path)), int(h.UID), int(h.GID)); err != nil {
			return unsupported(op, h.Path, "owners")
		}
	}
	return nil
}

func (d *Dir) setMeta(op, hp string, h *sink.Header) error {
	if err := d.checkMeta(op, h); err != nil {
		return err
	}
	if h.Type() != sink.TypeSymlink {
		if err := os.Chmod(hp, sink.UnixToFileMode(h.Mode)&^fs.ModeType); err != nil {
			return wrap(op, h.Path, err)
		}
		at, mt := h.Atime, h.Mtime
		if at.IsZero() {
			at = time.Unix(0, 0)
		}
		if mt.IsZero() {
			mt = time.Unix(0, 0)
		}
		if err := os.Chtimes(hp, at, mt); err != nil {
			return wrap(op, h.Path, err)
		}
	}
	return nil
}

// clear removes a non-directory at hp; a directory there is an error.
func clearPath(op, p, hp string) error {
	fi, err := os.Lstat(hp)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return wrap(op, p, fmt.Errorf("%w: is a directory", fs.ErrExist))
	}
	return wrap(op, p, os.Remove(hp))
}

// Mkdir implements sink.Sink.
func (d *Dir) Mkdir(h *sink.Header) error {
	if h.Type() != sink.TypeDir {
		return wrap("mkdir", h.Path, fs.ErrInvalid)
	}
	hp, err := d.host("mkdir", h.Path)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(hp); err != nil || !fi.IsDir() {
		if err == nil {
			os.Remove(hp)
		}
		if err := os.Mkdir(hp, 0o700); err != nil {
			return wrap("mkdir", h.Path, err)
		}
	}
	return d.setMeta("mkdir", hp, h)
}

// WriteFile implements sink.Sink.
func (d *Dir) WriteFile(h *sink.Header, r io.Reader) error {
	if h.Type() != sink.TypeReg || h.Size < 0 {
		return wrap("writefile", h.Path, fs.ErrInvalid)
	}
	hp, err := d.host("writefile", h.Path)
	if err != nil {
		return err
	}
	if err := clearPath("writefile", h.Path, hp); err != nil {
		return err
	}
	f, err := os.OpenFile(hp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return wrap("writefile", h.Path, err)
	}
	n, err := io.CopyN(f, r, h.Size)
	if err == io.EOF {
		err = fmt.Errorf("reading contents at byte %d of %d: %w", n, h.Size, io.ErrUnexpectedEOF)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(hp)
		return wrap("writefile", h.Path, err)
	}
	return d.setMeta("writefile", hp, h)
}

// Symlink implements sink.Sink.
func (d *Dir) Symlink(h *sink.Header) error {
	if h.Type() != sink.TypeSymlink || h.Linkname == "" {
		return wrap("symlink", h.Path, fs.ErrInvalid)
	}
	hp, err := d.host("symlink", h.Path)
	if err != nil {
		return err
	}
	if err := clearPath("symlink", h.Path, hp); err != nil {
		return err
	}
	if err := os.Symlink(h.Linkname, hp); err != nil {
		return wrap("symlink", h.Path, err)
	}
	return d.setMeta("symlink", hp, h)
}

// Mknod implements sink.Sink: not supported here.
func (d *Dir) Mknod(h *sink.Header) error {
	return unsupported("mknod", h.Path, "device, fifo and socket nodes")
}

// Link implements sink.Sink.
func (d *Dir) Link(oldname, newname string) error {
	op, err := d.host("link", oldname)
	if err != nil {
		return err
	}
	np, err := d.host("link", newname)
	if err != nil {
		return err
	}
	ofi, err := os.Lstat(op)
	if err != nil {
		return wrap("link", oldname, err)
	}
	if ofi.IsDir() {
		return wrap("link", oldname, fs.ErrInvalid)
	}
	if nfi, err := os.Lstat(np); err == nil && os.SameFile(ofi, nfi) {
		return nil
	}
	if err := clearPath("link", newname, np); err != nil {
		return err
	}
	return wrap("link", newname, os.Link(op, np))
}

// RemoveAll implements sink.Sink.
func (d *Dir) RemoveAll(p string) error {
	if p == "." {
		return wrap("removeall", p, fs.ErrInvalid)
	}
	hp, err := d.host("removeall", p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
			return nil
		}
		return err
	}
	return wrap("removeall", p, os.RemoveAll(hp))
}

// Lstat implements sink.Source. Ino is a hash of the path where the OS
// gives none, so hard links are not recognised there.
func (d *Dir) Lstat(p string) (*sink.Header, error) {
	hp, err := d.host("lstat", p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(hp)
	if err != nil {
		return nil, wrap("lstat", p, err)
	}
	h := &sink.Header{Path: p, Mode: sink.FileModeToUnix(fi.Mode()), Size: fi.Size(), Mtime: fi.ModTime(), Nlink: 1}
	hs := fnv.New64a()
	hs.Write([]byte(p))
	h.Ino = hs.Sum64()
	sysStat(fi, h)
	if h.Type() == sink.TypeSymlink {
		if h.Linkname, err = os.Readlink(hp); err != nil {
			return nil, wrap("lstat", p, err)
		}
	}
	return h, nil
}

// ReadDir implements sink.Source.
func (d *Dir) ReadDir(p string) ([]string, error) {
	hp, err := d.host("readdir", p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(hp)
	if err != nil {
		return nil, wrap("readdir", p, err)
	}
	if !fi.IsDir() {
		return nil, wrap("readdir", p, errNotDir)
	}
	f, err := os.Open(hp)
	if err != nil {
		return nil, wrap("readdir", p, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, wrap("readdir", p, err)
	}
	slices.Sort(names)
	return names, nil
}

// Open implements sink.Source.
func (d *Dir) Open(p string) (io.ReadCloser, error) {
	hp, err := d.host("open", p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(hp)
	if err != nil {
		return nil, wrap("open", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, wrap("open", p, fmt.Errorf("%w: not a regular file", fs.ErrInvalid))
	}
	f, err := os.Open(hp)
	if err != nil {
		return nil, wrap("open", p, err)
	}
	return f, nil
}
