package overlay

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"

	"z.gfire.dev/gvx/sink"
)

// Go's archive/tar writer cannot emit sparse maps, so ExportTar writes
// sparse files itself in GNU's PAX sparse format 1.0 (what GNU tar writes
// with --sparse --format=posix, and archive/tar reads): a PAX header with
// GNU.sparse.major=1, minor=0, name and realsize, then a ustar header
// whose data is the decimal map ("count\n" then "offset\nlength\n" per
// data region, padded to 512) followed by the data regions.

const (
	tarBlock       = 512
	sparseBlock    = 4096
	sparseMinHoles = 64 << 10 // below this, a file is written plainly
)

type region struct{ off, n int64 }

// scanRegions reads r and returns its non-zero 4 KiB-aligned regions and
// the number of bytes in holes.
func scanRegions(r io.Reader, size int64) ([]region, int64, error) {
	buf := make([]byte, 256<<10)
	var regs []region
	var holes, off int64
	zero := make([]byte, sparseBlock)
	for off < size {
		n := int(min(int64(len(buf)), size-off))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return nil, 0, fmt.Errorf("reading at %d: %w", off, err)
		}
		for b := 0; b < n; b += sparseBlock {
			e := min(b+sparseBlock, n)
			at := off + int64(b)
			if bytes.Equal(buf[b:e], zero[:e-b]) {
				holes += int64(e - b)
				continue
			}
			if k := len(regs) - 1; k >= 0 && regs[k].off+regs[k].n == at {
				regs[k].n += int64(e - b)
			} else {
				regs = append(regs, region{at, int64(e - b)})
			}
		}
		off += int64(n)
	}
	return regs, holes, nil
}

// mappedRegions turns a source's data regions into export regions,
// clipped to size and merged where adjacent, and counts the hole bytes.
func mappedRegions(rs []sink.Region, size int64) ([]region, int64) {
	var regs []region
	data := int64(0)
	for _, r := range rs {
		off, end := max(r.Off, 0), min(r.Off+r.Len, size)
		if k := len(regs) - 1; k >= 0 {
			off = max(off, regs[k].off+regs[k].n) // never backwards
		}
		if off >= end {
			continue
		}
		if k := len(regs) - 1; k >= 0 && regs[k].off+regs[k].n == off {
			regs[k].n += end - off
		} else {
			regs = append(regs, region{off, end - off})
		}
		data += end - off
	}
	return regs, size - data
}

// writeSparse writes the entry for regular file p (header h) as a PAX 1.0
// sparse file to w, reading data from src.
func writeSparse(w io.Writer, p string, h *sink.Header, recs map[string]string, regs []region, src io.Reader, buf []byte) error {
	if k := len(regs); k == 0 || regs[k-1].off+regs[k-1].n < h.Size {
		regs = append(regs, region{h.Size, 0}) // GNU tar marks a trailing hole so
	}
	var m []byte
	m = strconv.AppendInt(m, int64(len(regs)), 10)
	m = append(m, '\n')
	var data int64
	for _, r := range regs {
		m = strconv.AppendInt(m, r.off, 10)
		m = append(m, '\n')
		m = strconv.AppendInt(m, r.n, 10)
		m = append(m, '\n')
		data += r.n
	}
	m = append(m, make([]byte, pad(int64(len(m))))...)
	size := int64(len(m)) + data

	r := maps.Clone(recs)
	if r == nil {
		r = map[string]string{}
	}
	r["GNU.sparse.major"] = "1"
	r["GNU.sparse.minor"] = "0"
	r["GNU.sparse.name"] = p
	r["GNU.sparse.realsize"] = strconv.FormatInt(h.Size, 10)
	r["uid"] = strconv.FormatUint(uint64(h.UID), 10)
	r["gid"] = strconv.FormatUint(uint64(h.GID), 10)
	r["size"] = strconv.FormatInt(size, 10)
	r["mtime"] = formatPAXTime(h.Mtime.Unix(), h.Mtime.Nanosecond())
	if !h.Atime.IsZero() {
		r["atime"] = formatPAXTime(h.Atime.Unix(), h.Atime.Nanosecond())
	}
	if !h.Ctime.IsZero() {
		r["ctime"] = formatPAXTime(h.Ctime.Unix(), h.Ctime.Nanosecond())
	}
	var px []byte
	for _, k := range slices.Sorted(maps.Keys(r)) {
		px = append(px, paxRecord(k, r[k])...)
	}

	base := path.Base(p)
	xh := ustarHeader(truncName("PaxHeaders.0/"+base), 0o644, 0, 0, int64(len(px)), 0, 'x')
	mtime := h.Mtime.Unix()
	if mtime < 0 {
		mtime = 0
	}
	fh := ustarHeader(truncName("GNUSparseFile.0/"+base), int64(h.Mode&sink.ModePerm), int64(h.UID), int64(h.GID), size, mtime, '0')
	for _, b := range [][]byte{xh, px, make([]byte, pad(int64(len(px)))), fh, m} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	var at int64
	seeker, _ := src.(io.Seeker)
	for _, rg := range regs {
		if seeker != nil {
			// Over the hole without reading it.
			if _, err := seeker.Seek(rg.off, io.SeekStart); err != nil {
				return err
			}
		} else if _, err := io.CopyN(io.Discard, src, rg.off-at); err != nil {
			return fmt.Errorf("file changed while read: %w", err)
		}
		if n, err := io.CopyBuffer(onlyWriter{w}, io.LimitReader(src, rg.n), buf); err != nil || n < rg.n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("file changed while read: %d of %d bytes at %d: %w", n, rg.n, rg.off, err)
		}
		at = rg.off + rg.n
	}
	_, err := w.Write(make([]byte, pad(size)))
	return err
}

func pad(n int64) int64 { return -n & (tarBlock - 1) }

// paxRecord formats "LEN KEY=VALUE\n" where LEN counts the whole record.
func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3 // ' ', '=', '\n'
	l := len(strconv.Itoa(n))
	if len(strconv.Itoa(n+l)) > l {
		l++
	}
	return strconv.Itoa(n+l) + " " + k + "=" + v + "\n"
}

func truncName(s string) string {
	for len(s) > 99 {
		s = s[:len(s)-1]
	}
	return s
}

// ustarHeader builds one header block; numbers that do not fit their octal
// field are written as 0 (the PAX records carry them).
func ustarHeader(name string, mode, uid, gid, size, mtime int64, typ byte) []byte {
	b := make([]byte, tarBlock)
	copy(b[0:100], name)
	octal := func(f []byte, v int64) {
		s := strconv.FormatInt(v, 8)
		if v < 0 || len(s) > len(f)-1 {
			s = "0"
		}
		for i := range f[:len(f)-1] {
			f[i] = '0'
		}
		copy(f[len(f)-1-len(s):], s)
		f[len(f)-1] = 0
	}
	octal(b[100:108], mode)
	octal(b[108:116], uid)
	octal(b[116:124], gid)
	octal(b[124:136], size)
	octal(b[136:148], mtime)
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	for i := 148; i < 156; i++ {
		b[i] = ' '
	}
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}
