package ext4lite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// prepareCreate resolves p's parent and clears the way for a new entry of
// type typ: an existing non-directory is unlinked (replaced); an existing
// directory is returned as existing when typ is a directory, else refused.
func (v *FS) prepareCreate(p string, typ uint32) (pin *inode, d *dir, name string, existing *inode, err error) {
	pin, d, name, err = v.parentOf(p)
	if err != nil {
		return
	}
	de, ok := d.entries[name]
	if !ok {
		return
	}
	old, err := v.getInode(de.ino)
	if err != nil {
		return
	}
	if old.isDir() {
		if typ == disk.ModeDir {
			return pin, d, name, old, nil
		}
		return nil, nil, "", nil, errIsDir
	}
	err = v.unlink(pin, d, name, old)
	return
}

// applyHeader sets permissions, owner, times and xattrs from h.
func (v *FS) applyHeader(in *inode, h *sink.Header) error {
	in.d.Mode = uint16(in.fileType() | h.Mode&sink.ModePerm)
	in.d.SetOwner(h.UID, h.GID)
	epoch := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Unix(0, 0)
		}
		return t
	}
	v.setTimes(in, epoch(h.Atime), epoch(h.Mtime), epoch(h.Ctime), epoch(h.Crtime))
	return v.setAllXattrs(in, h.Xattrs)
}

func (v *FS) setAllXattrs(in *inode, m map[string][]byte) error {
	if !in.xattrsOK && len(m) == 0 && in.d.FileACL() == 0 && !v.hasInodeXattrs(in) {
		return nil
	}
	xs := make([]xattr, 0, len(m))
	for k, val := range m {
		if err := v.checkXattr(k, val); err != nil {
			return err
		}
		xs = append(xs, xattr{name: k, value: bytes.Clone(val)})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].name < xs[j].name })
	if err := v.xattrsFit(in.d.ExtraIsize, sortedForStore(xs)); err != nil {
		return err
	}
	in.xattrs, in.xattrsOK, in.xattrDirt, in.dirty = xs, true, true, true
	return nil
}

func (v *FS) hasInodeXattrs(in *inode) bool {
	start := disk.GoodOldInodeSize + int(in.d.ExtraIsize)
	return v.inodeSize > disk.GoodOldInodeSize && start+4 <= v.inodeSize &&
		binary.LittleEndian.Uint32(in.slot[start:]) == disk.XattrMagic
}

// Mkdir creates a directory or updates an existing one's metadata
// (sink.Sink).
func (v *FS) Mkdir(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	if h.Path == "." {
		root, err := v.getInode(disk.RootIno)
		if err != nil {
			return err
		}
		return v.applyHeader(root, h)
	}
	pin, d, name, old, err := v.prepareCreate(h.Path, disk.ModeDir)
	if err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	if old != nil {
		return v.applyHeader(old, h)
	}
	in, err := v.newInode(disk.ModeDir|h.Mode&sink.ModePerm, h.UID, h.GID, v.opts.now())
	if err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	in.d.LinksCount = 2
	in.d.Flags |= disk.FlagExtents
	in.ext = &extentMap{dirty: true}
	v.newDir(in.ino, pin.ino)
	if err := v.link(pin, d, name, in); err != nil {
		return pathErr("mkdir", h.Path, err)
	}
	return v.applyHeader(in, h)
}

// WriteFile creates or replaces a regular file with h.Size bytes from r
// (sink.Sink). All-zero blocks become holes.
func (v *FS) WriteFile(h *sink.Header, r io.Reader) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("write", h.Path, err)
	}
	if h.Size < 0 {
		return pathErr("write", h.Path, errInvalid)
	}
	if err := v.checkFileSize("write", uint64(h.Size)); err != nil {
		return pathErr("write", h.Path, err)
	}
	data := h.Size
	if sp, ok := r.(*sink.Sparse); ok && sp.Size() == h.Size {
		data = sp.DataSize()
	}
	if err := v.reclaimFor(v.dataNeed(data)); err != nil {
		return pathErr("write", h.Path, err)
	}
	pin, d, name, _, err := v.prepareCreate(h.Path, disk.ModeReg)
	if err != nil {
		return pathErr("write", h.Path, err)
	}
	in, err := v.newInode(disk.ModeReg|h.Mode&sink.ModePerm, h.UID, h.GID, v.opts.now())
	if err != nil {
		return pathErr("write", h.Path, err)
	}
	in.d.LinksCount = 1
	in.d.Flags |= disk.FlagExtents
	in.ext = &extentMap{dirty: true}
	if err := v.link(pin, d, name, in); err != nil {
		return pathErr("write", h.Path, err)
	}
	if err := v.fill(in, h, r); err != nil {
		// All or nothing: a file that could not be written whole (volume
		// full, short input) is removed again, its blocks freed.
		if uerr := v.unlink(pin, d, name, in); uerr != nil {
			return pathErr("write", h.Path, errors.Join(err, uerr))
		}
		return pathErr("write", h.Path, err)
	}
	return v.applyHeader(in, h)
}

// fill writes h.Size bytes from r into the new file in. A *sink.Sparse of
// that size is written region by region: its holes cost nothing.
func (v *FS) fill(in *inode, h *sink.Header, r io.Reader) error {
	if sp, ok := r.(*sink.Sparse); ok && sp.Size() == h.Size {
		if err := sp.WriteRegions(func(off int64, r io.Reader, n int64) error {
			return v.fillAt(in, r, off, n)
		}); err != nil {
			return err
		}
	} else if err := v.fillAt(in, r, 0, h.Size); err != nil {
		return err
	}
	in.d.SetSize(uint64(h.Size))
	return nil
}

// fillAt writes n bytes from r at off; all-zero blocks stay holes. A
// reader that is an io.WriterTo (overlay's import stream, bytes.Reader)
// hands over its own buffers, written without a copy; bytes past n are
// dropped, as a reader's are.
func (v *FS) fillAt(in *inode, r io.Reader, off, n int64) error {
	if wt, ok := r.(io.WriterTo); ok {
		fw := &fillWriter{v: v, in: in, off: off, n: n}
		_, err := wt.WriteTo(fw)
		if err != nil && err != errFilled && err == fw.err {
			return err // the volume's error, not the reader's
		}
		if fw.done < n {
			return fmt.Errorf("%w: got %d of %d bytes at %d", io.ErrUnexpectedEOF, fw.done, n, off)
		}
		return nil
	}
	buf := v.copyBuf()
	for done := int64(0); done < n; {
		k, rerr := io.ReadFull(r, buf[:min(int64(len(buf)), n-done)])
		if k > 0 {
			if err := v.writeData(in, buf[:k], off+done, true); err != nil {
				return err
			}
			done += int64(k)
		}
		if rerr != nil && done < n {
			return fmt.Errorf("%w: got %d of %d bytes at %d", io.ErrUnexpectedEOF, done, n, off)
		}
	}
	return nil
}

// fillWriter is fillAt's io.Writer for an io.WriterTo: it writes what it is
// given at off onwards, up to n bytes.
type fillWriter struct {
	v      *FS
	in     *inode
	off, n int64
	done   int64
	err    error // the write error Write returned, if any
}

// errFilled stops a WriterTo that has more than fillAt asked for.
var errFilled = errors.New("ext4lite: file filled")

func (w *fillWriter) Write(p []byte) (int, error) {
	k := int(min(int64(len(p)), w.n-w.done))
	if k > 0 {
		if err := w.v.writeData(w.in, p[:k], w.off+w.done, true); err != nil {
			w.err = err
			return 0, err
		}
		w.done += int64(k)
	}
	if k < len(p) {
		return k, errFilled
	}
	return k, nil
}

func (v *FS) copyBuf() []byte {
	if v.buf == nil {
		v.buf = make([]byte, 1<<20)
	}
	return v.buf
}

// validLinkname reports whether a symlink may point at target: not empty,
// shorter than a block, and no NUL. symlink(2) takes a C string, so no
// Linux link holds one; only a hand-made lisafs request could. The kernel
// and e2fsck take a target to end at its first NUL, so i_size would
// disagree with it (a corrupt inode), and no tar could carry it (the
// volume's export would fail at it).
func (v *FS) validLinkname(target string) bool {
	return len(target) > 0 && len(target) < v.bs && strings.IndexByte(target, 0) < 0
}

// Symlink creates a symbolic link (sink.Sink): fast (in the inode) below
// 60 bytes, else in a data block.
func (v *FS) Symlink(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("symlink", h.Path, err)
	}
	if !v.validLinkname(h.Linkname) {
		return pathErr("symlink", h.Path, errInvalid)
	}
	pin, d, name, _, err := v.prepareCreate(h.Path, disk.ModeSymlink)
	if err != nil {
		return pathErr("symlink", h.Path, err)
	}
	in, err := v.newInode(disk.ModeSymlink|0o777, h.UID, h.GID, v.opts.now())
	if err != nil {
		return pathErr("symlink", h.Path, err)
	}
	in.d.LinksCount = 1
	if len(h.Linkname) <= disk.FastSymlinkMax {
		copy(in.d.Block[:], h.Linkname)
		in.d.SetSize(uint64(len(h.Linkname)))
	} else {
		in.d.Flags |= disk.FlagExtents
		in.ext = &extentMap{dirty: true}
		if err := v.writeData(in, []byte(h.Linkname), 0, false); err != nil {
			return pathErr("symlink", h.Path, err)
		}
	}
	if err := v.link(pin, d, name, in); err != nil {
		return pathErr("symlink", h.Path, err)
	}
	hh := *h
	hh.Mode = 0o777
	return v.applyHeader(in, &hh)
}

// Mknod creates a device, fifo or socket (sink.Sink). A whiteout is a
// character device 0:0.
func (v *FS) Mknod(h *sink.Header) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return err
	}
	if err := v.checkHeaderXattrs(h); err != nil {
		return pathErr("mknod", h.Path, err)
	}
	typ := h.Mode & sink.TypeMask
	switch typ {
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo, sink.TypeSocket:
	default:
		return pathErr("mknod", h.Path, errInvalid)
	}
	pin, d, name, _, err := v.prepareCreate(h.Path, typ)
	if err != nil {
		return pathErr("mknod", h.Path, err)
	}
	in, err := v.newInode(typ|h.Mode&sink.ModePerm, h.UID, h.GID, v.opts.now())
	if err != nil {
		return pathErr("mknod", h.Path, err)
	}
	in.d.LinksCount = 1
	if typ == sink.TypeChar || typ == sink.TypeBlock {
		encodeDev(in.d.Block[:], h.Devmajor, h.Devminor)
	}
	if err := v.link(pin, d, name, in); err != nil {
		return pathErr("mknod", h.Path, err)
	}
	return v.applyHeader(in, h)
}

// encodeDev stores a device number in i_block as the kernel does: the old
// 16-bit encoding in word 0 when it fits, else the new one in word 1.
func encodeDev(b []byte, major, minor uint32) {
	clear(b[:12])
	if major < 256 && minor < 256 && (major != 0 || minor != 0) {
		binary.LittleEndian.PutUint32(b[0:], major<<8|minor)
		return
	}
	binary.LittleEndian.PutUint32(b[4:], minor&0xff|major<<8|(minor&^0xff)<<12)
}

func decodeDev(b []byte) (major, minor uint32) {
	if w := binary.LittleEndian.Uint32(b[0:]); w != 0 {
		return (w >> 8) & 0xff, w & 0xff
	}
	w := binary.LittleEndian.Uint32(b[4:])
	return (w & 0xfff00) >> 8, w&0xff | (w>>12)&0xfff00
}
