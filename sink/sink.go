package sink

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Unix file type bits (S_IFMT and friends), as stored by ext4, EROFS and tar.
const (
	TypeMask    = 0o170000 // S_IFMT
	TypeSocket  = 0o140000 // S_IFSOCK
	TypeSymlink = 0o120000 // S_IFLNK
	TypeReg     = 0o100000 // S_IFREG
	TypeBlock   = 0o060000 // S_IFBLK
	TypeDir     = 0o040000 // S_IFDIR
	TypeChar    = 0o020000 // S_IFCHR
	TypeFifo    = 0o010000 // S_IFIFO

	ModeSetuid = 0o4000
	ModeSetgid = 0o2000
	ModeSticky = 0o1000
	ModePerm   = 0o7777 // permission bits including setuid/setgid/sticky
)

// Errors shared by every sink.
var (
	// ErrSymlinkInPath reports a path whose intermediate component is a
	// symbolic link; sinks never follow it.
	ErrSymlinkInPath = errors.New("sink: path goes through a symbolic link")
	// ErrUnsupported reports metadata or a file type the sink cannot store.
	ErrUnsupported = errors.New("sink: not supported by this target")
)

// Header describes one entry. Zero times are allowed: the sink then uses the
// Unix epoch, so output stays deterministic.
type Header struct {
	Path     string // cleaned, slash-separated, relative to the root
	Mode     uint32 // Unix mode: Type* bits | ModePerm bits
	UID, GID uint32
	Size     int64  // regular files: number of bytes WriteFile reads
	Linkname string // symlinks: the target, stored verbatim

	Devmajor, Devminor uint32 // char and block devices

	Atime, Mtime, Ctime, Crtime time.Time

	// Ino and Nlink are filled by sources (hard links share Ino); sinks
	// ignore them.
	Ino   uint64
	Nlink uint32

	// Xattrs maps full attribute names ("user.foo", "trusted.overlay.opaque",
	// "security.capability") to values. Nil and empty mean none.
	Xattrs map[string][]byte
}

// Type returns the file type bits of h.Mode.
func (h *Header) Type() uint32 { return h.Mode & TypeMask }

// Sink is a writable filesystem tree. See the package doc for the contract.
type Sink interface {
	// Mkdir creates a directory, or updates the metadata (mode, owner,
	// times, xattrs — replaced, not merged) of an existing one.
	Mkdir(h *Header) error
	// WriteFile creates or replaces a regular file with h.Size bytes read
	// from r. Sinks may store all-zero blocks as holes.
	WriteFile(h *Header, r io.Reader) error
	// Symlink creates a symbolic link to h.Linkname.
	Symlink(h *Header) error
	// Mknod creates a character or block device, a fifo or a socket.
	Mknod(h *Header) error
	// Link makes newname a hard link to the existing non-directory oldname.
	Link(oldname, newname string) error
	// RemoveAll removes path and, for a directory, everything below it. A
	// missing path is not an error.
	RemoveAll(path string) error
	// Lstat and ReadDir are as in Source: walkers need them to apply
	// whiteouts and opaque directories.
	Lstat(path string) (*Header, error)
	ReadDir(path string) ([]string, error)
}

// Source is a readable filesystem tree with full Unix metadata: ext4lite
// volumes, EROFS images and host directories implement it, so trees can be
// copied (Copy), exported as tar and compared in tests without caring where
// they live. Paths follow the same rules as for Sink.
type Source interface {
	// Lstat returns the entry's header (Linkname for symlinks, Size for
	// regular files, Xattrs, Ino/Nlink) without following a final symlink,
	// or an error wrapping fs.ErrNotExist.
	Lstat(path string) (*Header, error)
	// ReadDir returns the names of a directory's entries, sorted.
	ReadDir(path string) ([]string, error)
	// Open returns the contents of a regular file.
	Open(path string) (io.ReadCloser, error)
}

// DataMapper is implemented by sources that know where a regular file's
// data lies (ext4lite: its extent map). DataRegions returns, in file order
// and not overlapping, the byte ranges that may hold non-zero data;
// everything else reads as zeros. With it an exporter skips holes without
// reading them: time linear in the data, not in the apparent size.
type DataMapper interface {
	DataRegions(path string) ([]Region, error)
}

// Region is a byte range of a file.
type Region struct{ Off, Len int64 }

// Finisher is implemented by sinks that must flush or seal after a walk.
type Finisher interface {
	Finish() error
}

// FileModeToUnix converts an io/fs mode to Unix mode bits.
func FileModeToUnix(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= ModeSetuid
	}
	if m&fs.ModeSetgid != 0 {
		u |= ModeSetgid
	}
	if m&fs.ModeSticky != 0 {
		u |= ModeSticky
	}
	switch {
	case m&fs.ModeDir != 0:
		u |= TypeDir
	case m&fs.ModeSymlink != 0:
		u |= TypeSymlink
	case m&fs.ModeNamedPipe != 0:
		u |= TypeFifo
	case m&fs.ModeSocket != 0:
		u |= TypeSocket
	case m&fs.ModeCharDevice != 0:
		u |= TypeChar
	case m&fs.ModeDevice != 0:
		u |= TypeBlock
	default:
		u |= TypeReg
	}
	return u
}

// UnixToFileMode converts Unix mode bits to an io/fs mode.
func UnixToFileMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&ModeSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&ModeSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&ModeSticky != 0 {
		m |= fs.ModeSticky
	}
	switch u & TypeMask {
	case TypeDir:
		m |= fs.ModeDir
	case TypeSymlink:
		m |= fs.ModeSymlink
	case TypeFifo:
		m |= fs.ModeNamedPipe
	case TypeSocket:
		m |= fs.ModeSocket
	case TypeChar:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case TypeBlock:
		m |= fs.ModeDevice
	}
	return m
}

// TypeName names the file type in mode (st_mode's S_IFMT bits, which
// TypeMask selects) in words for messages: "regular file", "directory",
// "symlink", "character device", "block device", "fifo", "socket", or
// "type 0o…" for bits that name none.
func TypeName(mode uint32) string {
	switch mode & TypeMask {
	case TypeReg:
		return "regular file"
	case TypeDir:
		return "directory"
	case TypeSymlink:
		return "symlink"
	case TypeChar:
		return "character device"
	case TypeBlock:
		return "block device"
	case TypeFifo:
		return "fifo"
	case TypeSocket:
		return "socket"
	}
	return fmt.Sprintf("type %#o", mode&TypeMask)
}
