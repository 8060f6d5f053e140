package ext4lite

import (
	"io"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
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
	return v.writeAtLocked(in, p, off)
}

// writeAtLocked writes p at off in the regular file in and stamps its
// mtime and ctime: the one write of WriteAtIno and File.WriteAt (v.mu
// held). Blocks freed by the last operations are reclaimed first when the
// write needs them.
func (v *FS) writeAtLocked(in *inode, p []byte, off int64) (int, error) {
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

// Open returns a reader of a regular file's contents (sink.Source).
func (v *FS) Open(p string) (io.ReadCloser, error) {
	f, err := v.OpenFile(p)
	if err != nil {
		return nil, err
	}
	// Seekable (and io.ReaderAt): an exporter that knows the data regions
	// (DataRegions) seeks over holes instead of reading them.
	return struct {
		*io.SectionReader
		io.Closer
	}{io.NewSectionReader(f, 0, f.Size()), f}, nil
}

// DataRegions implements sink.DataMapper: the byte ranges of the regular
// file at p its extent map backs with written blocks (holes and unwritten
// extents read as zeros and are left out), clipped to its size.
func (v *FS) DataRegions(p string) ([]sink.Region, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("open", p)
	if err != nil {
		return nil, err
	}
	if in.fileType() != disk.ModeReg {
		return nil, pathErr("open", p, errInvalid)
	}
	size := int64(in.d.Size())
	if !usesBlockData(in) || in.d.Flags&disk.FlagExtents == 0 {
		return []sink.Region{{Off: 0, Len: size}}, nil // no map to go by: all data
	}
	m, err := v.loadExtents(in)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	var out []sink.Region
	bs := int64(v.bs)
	for _, e := range m.ext {
		off := int64(e.Block) * bs
		end := min(size, off+int64(e.Len)*bs)
		if e.Uninit || off >= end {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == off {
			out[k].Len = end - out[k].Off
		} else {
			out = append(out, sink.Region{Off: off, Len: end - off})
		}
	}
	return out, nil
}

// File is an open regular file of a volume.
type File struct {
	v  *FS
	in *inode
}

// OpenFile opens a regular file for reading and writing at offsets.
func (v *FS) OpenFile(p string) (*File, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, err := v.lookupFor("open", p)
	if err != nil {
		return nil, err
	}
	if in.isDir() {
		return nil, pathErr("open", p, errIsDir)
	}
	if in.fileType() != disk.ModeReg {
		return nil, pathErr("open", p, errInvalid)
	}
	return &File{v: v, in: in}, nil
}

// Size is the file's current size.
func (f *File) Size() int64 {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	return int64(f.in.d.Size())
}

// ReadAt implements io.ReaderAt.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if f.v.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, errInvalid
	}
	return f.v.readData(f.in, p, off)
}

// WriteAt implements io.WriterAt, allocating blocks as needed.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if err := f.v.writable(); err != nil {
		return 0, err
	}
	return f.v.writeAtLocked(f.in, p, off)
}

// Truncate changes the file's size and stamps its mtime and ctime, as
// ftruncate(2) does on the kernel's ext4 (it changed only the size).
func (f *File) Truncate(size int64) error {
	if size < 0 {
		return errInvalid
	}
	return f.v.change(func() (*inode, error) { return f.in, nil },
		func(in *inode) error { return f.v.setAttr(in, SetAttr{Size: &size}) })
}

// Close releases the handle (data stays cached until Sync or Close of the
// volume).
func (f *File) Close() error { return nil }

// Truncate changes the size of the regular file at p and stamps its mtime
// and ctime (File.Truncate).
func (v *FS) Truncate(p string, size int64) error {
	f, err := v.OpenFile(p)
	if err != nil {
		return err
	}
	return f.Truncate(size)
}
