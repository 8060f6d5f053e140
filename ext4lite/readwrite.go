package ext4lite

import (
	"io"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// ReadAtIno reads a regular file's data.
func (v *FS) ReadAtIno(ino Ino, p []byte, off int64) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return 0, err
	}
	if in.fileType() != disk.ModeReg {
		return 0, errInvalid
	}
	if off < 0 {
		return 0, errInvalid
	}
	n, err := v.readData(in, p, off)
	if err == io.EOF && n > 0 && n == len(p) {
		err = nil
	}
	return n, err
}

// WriteAtIno writes a regular file's data, allocating blocks as needed.
func (v *FS) WriteAtIno(ino Ino, p []byte, off int64) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.beginOp(); err != nil {
		return 0, err
	}
	in, err := v.inoLocked(ino)
	if err != nil {
		return 0, err
	}
	if in.fileType() != disk.ModeReg || off < 0 {
		return 0, errInvalid
	}
	// As write(2) at the size limit: the bytes below it are written and
	// counted, a write starting at it fails with EFBIG.
	if max := v.maxFileSize(); uint64(off) < max && uint64(off)+uint64(len(p)) > max {
		p = p[:max-uint64(off)]
	}
	if err := v.reclaimFor(v.dataNeed(int64(len(p)))); err != nil {
		return 0, err
	}
	if err := v.writeData(in, p, off, false); err != nil {
		return 0, err
	}
	t := v.opts.now()
	in.d.Mtime, in.d.MtimeExtra = disk.EncodeTime(t)
	in.d.Ctime, in.d.CtimeExtra = disk.EncodeTime(t)
	return len(p), nil
}

// FileExtent maps part of a regular file to bytes of the volume file.
type FileExtent struct {
	Offset   int64 // in the file
	Length   int64
	VolumeAt int64 // byte offset in the volume file
}

// FileExtents returns where a regular file's written data lives in the
// volume file (holes and unwritten extents are absent), in file order.
// With it a server can hand out a copy of the file cheaply: a reflink of
// each extent (FICLONERANGE) where the host filesystem can, else
// copy_file_range. The mapping is valid until the file is next written or
// truncated; the caller holds no lock meanwhile, so it must serialize
// itself with writers of that file.
func (v *FS) FileExtents(ino Ino) ([]FileExtent, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.inoLocked(ino)
	if err != nil {
		return nil, err
	}
	if in.fileType() != disk.ModeReg {
		return nil, errInvalid
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return nil, err
	}
	bs, size := int64(v.bs), int64(in.d.Size())
	var out []FileExtent
	for _, e := range m.ext {
		if e.Uninit {
			continue
		}
		off := int64(e.Block) * bs
		if off >= size {
			break
		}
		n := min(int64(e.Len)*bs, size-off)
		out = append(out, FileExtent{Offset: off, Length: n, VolumeAt: int64(e.Start) * bs})
	}
	return out, nil
}
