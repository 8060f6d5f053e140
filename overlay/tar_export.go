package overlay

import (
	"archive/tar"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"z.gfire.dev/gvx/sink"
)

// ExportOptions tunes ExportTar.
type ExportOptions struct {
	// SkipRoot leaves out the "./" entry that carries the root's metadata.
	SkipRoot bool
	// SkipSockets leaves sockets out; tar cannot hold them, so without it
	// a socket is an error wrapping ErrUnsupported.
	SkipSockets bool
	// Skipped, if set, is called with the path of each socket SkipSockets
	// leaves out (for a warning).
	Skipped func(path string)
	// Compression of the output: Uncompressed (default), Gzip or Zstd.
	Compression Compression
	// NoSparse writes every file in full. By default a file with at least
	// 64 KiB of all-zero 4 KiB blocks is written in GNU's PAX sparse format
	// 1.0 (read by GNU tar, archive/tar and ImportTar), which costs a
	// second read of the file.
	NoSparse bool
	// Crtime records creation times as LIBARCHIVE.creationtime (bsdtar's
	// keyword; ImportTar reads it). Off by default: GNU tar warns about the
	// unknown keyword on every entry, and few filesystems can set it.
	Crtime bool
	// MaxPath bounds an entry's path, in bytes: 0 means DefaultMaxPath,
	// negative none. tar spells out every entry's whole path, so a tree
	// nested N deep costs O(N²) bytes of archive: a guest's 20,000 nested
	// directories, a 125 MiB volume, made a 428 MB archive, and 100,000
	// would make some 10 GB. An entry whose path is longer is an error
	// wrapping ErrTooLong, or, with TooLong set, left out with everything
	// below it.
	MaxPath int
	// TooLong, if set, is called with the path of each entry MaxPath leaves
	// out (for a warning; its subtree is not visited).
	TooLong func(path string)
	// Linked, if set, is called for each directory the walk meets a second
	// time (a hard link to a directory, at path, to the one exported at
	// first), which is then left out with everything below it (for a
	// warning). Without it such a directory stops the export with a
	// *sink.DirLinkError. Only a crafted or damaged volume or image has
	// one, and MaxPath alone does not bound what it makes: a link to an
	// ancestor repeats the tree until MaxPath (an 8 MiB volume made
	// gigabytes), directories linked twice, nested, double the paths at
	// every level.
	Linked func(path, first string)
}

// DefaultMaxPath is ExportOptions.MaxPath's default: Linux's PATH_MAX,
// the longest path a program can open in one call (GNU tar extracts
// longer ones only step by step).
const DefaultMaxPath = 4096

// ExportTar writes the tree of src to w as a PAX tar archive that ImportTar
// (and GNU tar with --xattrs --xattrs-include='*') restores losslessly:
// mode incl. setuid/setgid/sticky, numeric owners, nanosecond mtime, atime
// and ctime, xattrs as SCHILY.xattr.*, devices, fifos, and hard links (by
// Ino) as link entries, files with 64 KiB or more of holes as GNU PAX 1.0
// sparse entries; with opts.Crtime, creation times as
// LIBARCHIVE.creationtime.
// Entries come in sorted depth-first order, directories before their
// children, so the same tree always makes the same bytes. Each directory
// (by Ino) is exported once, so the archive is bounded by the tree's
// entries whatever links a crafted source holds (ExportOptions.Linked).
func ExportTar(w io.Writer, src sink.Source, opts ExportOptions) error {
	out := w
	var closer io.Closer
	switch opts.Compression {
	case Uncompressed:
	case Gzip:
		zw := gzip.NewWriter(w)
		out, closer = zw, zw
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("overlay: export: %w", err)
		}
		out, closer = zw, zw
	default:
		return fmt.Errorf("overlay: export: %w: %s output", ErrUnsupported, opts.Compression)
	}
	e := &exporter{tw: tar.NewWriter(out), out: out, src: src, o: opts, links: map[uint64]string{}, dirs: sink.DirSet{}}
	if err := e.walk("."); err != nil {
		return err
	}
	if err := e.tw.Close(); err != nil {
		return fmt.Errorf("overlay: export: %w", err)
	}
	if closer != nil {
		if err := closer.Close(); err != nil {
			return fmt.Errorf("overlay: export: %w", err)
		}
	}
	return nil
}

type exporter struct {
	tw    *tar.Writer
	out   io.Writer // under tw, for entries tw cannot write (sparse files)
	src   sink.Source
	o     ExportOptions
	links map[uint64]string // Ino → first name, for Nlink > 1
	dirs  sink.DirSet       // directories exported
	buf   []byte
}

func (e *exporter) walk(p string) error {
	if max := e.o.MaxPath; max >= 0 && len(p) > cmp.Or(max, DefaultMaxPath) {
		if e.o.TooLong == nil {
			return fmt.Errorf("%w (%d bytes, at most %d): %.64q…", ErrTooLong, len(p), cmp.Or(max, DefaultMaxPath), p)
		}
		e.o.TooLong(p)
		return nil
	}
	h, err := e.src.Lstat(p)
	if err != nil {
		return fmt.Errorf("overlay: export: %w", err)
	}
	if err := e.dirs.Enter(p, h); err != nil {
		var de *sink.DirLinkError
		if e.o.Linked == nil || !errors.As(err, &de) {
			return fmt.Errorf("overlay: export: %w", err)
		}
		e.o.Linked(p, de.First)
		return nil
	}
	if p != "." || !e.o.SkipRoot {
		if err := e.write(p, h); err != nil {
			return fmt.Errorf("overlay: export %q: %w", p, err)
		}
	}
	if h.Type() != sink.TypeDir {
		return nil
	}
	names, err := e.src.ReadDir(p)
	if err != nil {
		return fmt.Errorf("overlay: export: %w", err)
	}
	for _, n := range names {
		if err := e.walk(joinPath(p, n)); err != nil {
			return err
		}
	}
	return nil
}

func (e *exporter) write(p string, h *sink.Header) error {
	th := &tar.Header{
		Name:       p,
		Mode:       int64(h.Mode & sink.ModePerm),
		Uid:        int(h.UID),
		Gid:        int(h.GID),
		ModTime:    h.Mtime,
		AccessTime: h.Atime,
		ChangeTime: h.Ctime,
		Format:     tar.FormatPAX,
	}
	crtime := e.o.Crtime && !h.Crtime.IsZero()
	if len(h.Xattrs) > 0 || crtime {
		th.PAXRecords = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(h.Xattrs)) {
		switch {
		case strings.IndexByte(k, 0) >= 0:
			return fmt.Errorf("%w: xattr name %q holds a NUL", ErrUnsupported, k)
		case strings.IndexByte(k, '=') >= 0:
			// A PAX key ends at its first "=": such a name (Linux allows
			// it; a guest sets one to make its volume unexportable) goes
			// as bsdtar writes every xattr, URL-escaped name and base64
			// value, which ImportTar and bsdtar read.
			th.PAXRecords[paxLibarchiveXatr+escapeXattrName(k)] = base64.StdEncoding.EncodeToString(h.Xattrs[k])
		default:
			th.PAXRecords[paxSchilyXattr+k] = string(h.Xattrs[k])
		}
	}
	if crtime {
		th.PAXRecords[paxCrtime] = formatPAXTime(h.Crtime.Unix(), h.Crtime.Nanosecond())
	}
	var body io.ReadCloser
	switch h.Type() {
	case sink.TypeDir:
		th.Typeflag = tar.TypeDir
		if p == "." {
			th.Name = "./"
		} else {
			th.Name += "/"
		}
	case sink.TypeReg:
		if h.Nlink > 1 {
			if first, ok := e.links[h.Ino]; ok {
				th.Typeflag, th.Linkname = tar.TypeLink, first
				break
			}
			e.links[h.Ino] = p
		}
		th.Typeflag, th.Size = tar.TypeReg, h.Size
		if !e.o.NoSparse && h.Size >= sparseMinHoles && e.out != nil {
			if done, err := e.sparse(p, h, th.PAXRecords); done || err != nil {
				return err
			}
		}
		r, err := e.src.Open(p)
		if err != nil {
			return err
		}
		body = r
	case sink.TypeSymlink:
		th.Typeflag, th.Linkname = tar.TypeSymlink, h.Linkname
	case sink.TypeChar, sink.TypeBlock, sink.TypeFifo:
		if h.Nlink > 1 {
			if first, ok := e.links[h.Ino]; ok {
				th.Typeflag, th.Linkname = tar.TypeLink, first
				break
			}
			e.links[h.Ino] = p
		}
		th.Typeflag = map[uint32]byte{sink.TypeChar: tar.TypeChar, sink.TypeBlock: tar.TypeBlock, sink.TypeFifo: tar.TypeFifo}[h.Type()]
		th.Devmajor, th.Devminor = int64(h.Devmajor), int64(h.Devminor)
	case sink.TypeSocket:
		if e.o.SkipSockets {
			if e.o.Skipped != nil {
				e.o.Skipped(p)
			}
			return nil
		}
		return fmt.Errorf("%w: tar cannot hold a socket", ErrUnsupported)
	default:
		return fmt.Errorf("%w: file type %o", ErrUnsupported, h.Type())
	}
	if th.Typeflag == tar.TypeSymlink || th.Typeflag == tar.TypeLink {
		// Symlinks and link entries carry no data; keep it so.
		th.Size = 0
	}
	if err := e.tw.WriteHeader(th); err != nil {
		if body != nil {
			body.Close()
		}
		return err
	}
	if body != nil {
		defer body.Close()
		n, err := io.CopyBuffer(onlyWriter{e.tw}, body, e.copyBuf())
		if err != nil {
			return err
		}
		if n != h.Size {
			return fmt.Errorf("file changed while read: %d bytes, header said %d", n, h.Size)
		}
	}
	return nil
}

// escapeXattrName percent-encodes every byte of an xattr name but ASCII
// letters, digits, ".", "_" and "-", as bsdtar does for its
// LIBARCHIVE.xattr records (paxExtras reads them with url.PathUnescape).
func escapeXattrName(k string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func formatPAXTime(sec int64, nsec int) string {
	if sec < 0 && nsec != 0 {
		// PAX writes -1.5 for 1.5 s before the epoch.
		sec++
		nsec = 1e9 - nsec
		s := strconv.FormatInt(sec, 10)
		if sec == 0 {
			s = "-0"
		}
		return s + "." + fmt.Sprintf("%09d", nsec)
	}
	return strconv.FormatInt(sec, 10) + "." + fmt.Sprintf("%09d", nsec)
}

// sparse writes p as a sparse entry if it has enough holes; done reports
// whether it did.
func (e *exporter) sparse(p string, h *sink.Header, recs map[string]string) (done bool, err error) {
	var regs []region
	var holes int64
	if dm, ok := e.src.(sink.DataMapper); ok {
		// The source knows where the data is: no byte of a hole is read.
		rs, err := dm.DataRegions(p)
		if err != nil {
			return false, err
		}
		regs, holes = mappedRegions(rs, h.Size)
	} else {
		r, err := e.src.Open(p)
		if err != nil {
			return false, err
		}
		regs, holes, err = scanRegions(r, h.Size)
		r.Close()
		if err != nil {
			return false, err
		}
	}
	if holes < sparseMinHoles {
		return false, nil
	}
	if err := e.tw.Flush(); err != nil {
		return false, err
	}
	r, err := e.src.Open(p)
	if err != nil {
		return false, err
	}
	defer r.Close()
	return true, writeSparse(e.out, p, h, recs, regs, r, e.copyBuf())
}

// copyBuf is the exporter's copy buffer: 1 MiB, so reading a volume's
// file costs one read per MiB, not per io.Copy's 32 KiB (or io.Discard's
// 8 KiB).
func (e *exporter) copyBuf() []byte {
	if e.buf == nil {
		e.buf = make([]byte, 1<<20)
	}
	return e.buf
}

// onlyWriter hides a writer's ReadFrom, so io.CopyBuffer uses its buffer.
type onlyWriter struct{ io.Writer }
