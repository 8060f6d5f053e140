package ext4lite

import (
	"errors"
	"fmt"
	"io"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

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
	in, err := v.create(pin, d, name, disk.ModeReg, h)
	if err != nil {
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
