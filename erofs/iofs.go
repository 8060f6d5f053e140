package erofs

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"time"

	"z.gfire.dev/gvx/sink"
)

// FS returns the image as an io/fs.FS (also fs.StatFS, fs.ReadDirFS and
// fs.ReadLinkFS), for fs.WalkDir, http.FS, template parsing and the like.
// Like the sink view it never follows a symlink: opening one gives the
// link itself (Mode has fs.ModeSymlink), and a path through one fails with
// sink.ErrSymlinkInPath. FileInfo.Sys returns the entry's *sink.Header.
// fs.WalkDir follows every name: on a crafted image that names a
// directory twice it never ends, so Check an untrusted image first (it
// rejects any directory reached twice).
func (im *Image) FS() fs.FS { return imageFS{im} }

type imageFS struct{ im *Image }

var (
	_ fs.StatFS     = imageFS{}
	_ fs.ReadDirFS  = imageFS{}
	_ fs.ReadLinkFS = imageFS{}
)

func (f imageFS) header(op, name string) (*sink.Header, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	h, err := f.im.Lstat(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: op, Path: name, Err: pe.Err}
		}
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return h, nil
}

// Open implements fs.FS.
func (f imageFS) Open(name string) (fs.File, error) {
	h, err := f.header("open", name)
	if err != nil {
		return nil, err
	}
	fi := fileInfo{h}
	switch h.Type() {
	case sink.TypeDir:
		return &dirFile{fs: f, name: name, fi: fi}, nil
	case sink.TypeReg:
		r, err := f.im.Open(name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &regFile{fi: fi, r: r}, nil
	}
	return &regFile{fi: fi, r: io.NopCloser(eofReader{})}, nil
}

// Stat implements fs.StatFS (without following a final symlink).
func (f imageFS) Stat(name string) (fs.FileInfo, error) {
	h, err := f.header("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{h}, nil
}

// Lstat implements fs.ReadLinkFS.
func (f imageFS) Lstat(name string) (fs.FileInfo, error) { return f.Stat(name) }

// ReadLink implements fs.ReadLinkFS.
func (f imageFS) ReadLink(name string) (string, error) {
	h, err := f.header("readlink", name)
	if err != nil {
		return "", err
	}
	if h.Type() != sink.TypeSymlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return h.Linkname, nil
}

// ReadDir implements fs.ReadDirFS.
func (f imageFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	names, err := f.im.ReadDir(name)
	if err != nil {
		return nil, err
	}
	ents := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		h, err := f.header("readdir", path.Join(name, n))
		if err != nil {
			return nil, err
		}
		ents = append(ents, fs.FileInfoToDirEntry(fileInfo{h}))
	}
	return ents, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type fileInfo struct{ h *sink.Header }

func (fi fileInfo) Name() string {
	if fi.h.Path == "." {
		return "."
	}
	return path.Base(fi.h.Path)
}
func (fi fileInfo) Size() int64        { return fi.h.Size }
func (fi fileInfo) Mode() fs.FileMode  { return sink.UnixToFileMode(fi.h.Mode) }
func (fi fileInfo) ModTime() time.Time { return fi.h.Mtime }
func (fi fileInfo) IsDir() bool        { return fi.h.Type() == sink.TypeDir }
func (fi fileInfo) Sys() any           { return fi.h }

type regFile struct {
	fi fileInfo
	r  io.ReadCloser
}

func (f *regFile) Stat() (fs.FileInfo, error) { return f.fi, nil }
func (f *regFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *regFile) Close() error               { return f.r.Close() }

type dirFile struct {
	fs   imageFS
	name string
	fi   fileInfo
	ents []fs.DirEntry
	read bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}
func (d *dirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		ents, err := d.fs.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.ents, d.read = ents, true
	}
	if n <= 0 {
		ents := d.ents
		d.ents = nil
		return ents, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.ents))
	ents := d.ents[:n]
	d.ents = d.ents[n:]
	return ents, nil
}
