package overlay

import (
	"archive/tar"
	"fmt"
	"io"
	"strconv"
	"strings"

	"z.gfire.dev/gvx/sink"
)

// Sparse tar entries without reading their holes.
//
// archive/tar reads GNU (old 'S') and PAX (0.0, 0.1, 1.0) sparse entries,
// but only as their apparent contents: a 1 TiB hole costs 1 TiB of zeros
// copied and then compared, and the sparse map is not exported. So the
// importer reads such entries itself, beside archive/tar:
//
//   - tarTap sits between the archive and tar.Reader and records the bytes
//     of each Next call (the entry's header blocks: PAX and GNU long-name
//     records, the header, old GNU extension blocks, a PAX 1.0 map).
//   - sparseEntry parses the map from them (parseSparse) and returns the
//     file as a *sink.Sparse whose data comes straight from the archive.
//   - Those data bytes are then owed to tar.Reader, which still believes
//     they are unread: it skips them at the next Next, and the tap serves
//     them as zeros without reading the archive again. archive/tar reads its
//     input strictly in order and never ahead, so this stays in step.
//
// The map is checked as archive/tar checks it (in order, not overlapping,
// inside the size), and the bytes it covers must be what the entry stores.

// maxHeaderRecord bounds the header bytes recorded for one entry:
// archive/tar allows 1 MiB per PAX record set, long name and sparse map.
const maxHeaderRecord = 8 << 20

// tarTap is the reader under tar.Reader; see above.
type tarTap struct {
	r         io.Reader
	pos       int64 // archive offset as tar.Reader sees it
	owed      int64 // bytes read past tar.Reader's back, served to it as zeros
	rec       []byte
	recFrom   int64 // archive offset of rec[0]
	recording bool
	overflow  bool
}

func (t *tarTap) Read(p []byte) (int, error) {
	if t.owed > 0 {
		n := int(min(int64(len(p)), t.owed))
		clear(p[:n])
		t.owed -= int64(n)
		t.pos += int64(n)
		return n, nil
	}
	n, err := t.r.Read(p)
	t.pos += int64(n)
	if t.recording && n > 0 {
		if len(t.rec)+n > maxHeaderRecord {
			t.overflow, t.recording = true, false
		} else {
			t.rec = append(t.rec, p[:n]...)
		}
	}
	return n, err
}

// next calls tr.Next, recording the header bytes it reads. The previous
// entry's data must have been read whole (or owed).
func (t *tarTap) next(tr *tar.Reader) (*tar.Header, error) {
	t.rec, t.recFrom, t.recording, t.overflow = t.rec[:0], t.pos+t.owed, true, false
	hdr, err := tr.Next()
	t.recording = false
	if err == io.EOF && t.pos%tarBlock != 0 {
		// archive/tar says io.EOF when the stream ends inside the zero
		// padding of a record (PAX records, an entry's data): a cut
		// archive, which GNU tar refuses too ("Unexpected EOF in archive").
		// An archive ending at a record boundary, with or without its
		// end-of-archive blocks, is whole.
		return nil, fmt.Errorf("%w: the archive ends at byte %d, inside a %d-byte record (a cut or truncated archive; make or copy it again)", io.ErrUnexpectedEOF, t.pos, tarBlock)
	}
	return hdr, err
}

// isSparse reports whether archive/tar decoded hdr as a sparse entry.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	if hdr.Typeflag != tar.TypeReg {
		return false
	}
	major, minor := hdr.PAXRecords["GNU.sparse.major"], hdr.PAXRecords["GNU.sparse.minor"]
	switch {
	case major == "0" && (minor == "0" || minor == "1"), major == "1" && minor == "0":
		return true
	case major != "" || minor != "":
		return false // an unknown version: archive/tar reads it as a plain file
	}
	return hdr.PAXRecords["GNU.sparse.map"] != ""
}

// sparseEntry returns the contents of the sparse entry hdr just returned
// by next, reading its data from the archive directly, and owes tar.Reader
// the bytes it stores. done must be called once the sink is finished with
// the contents: it reads what the sink left unread.
func (t *tarTap) sparseEntry(hdr *tar.Header) (sp *sink.Sparse, done func() error, err error) {
	regs, stored, err := t.sparseMap(hdr)
	if err != nil {
		return nil, nil, err
	}
	body := &io.LimitedReader{R: t.r, N: stored}
	sp, err = sink.NewSparse(hdr.Size, regs, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	done = func() error {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		if body.N > 0 {
			return fmt.Errorf("%w: sparse entry: %w", ErrCorrupt, io.ErrUnexpectedEOF)
		}
		t.owed += stored
		return nil
	}
	return sp, done, nil
}

// sparseMap parses the map of the sparse entry hdr just returned by next
// and returns it with the number of data bytes the entry stores, which
// follow in the archive (read them from t.r, then add them to t.owed).
func (t *tarTap) sparseMap(hdr *tar.Header) ([]sink.Region, int64, error) {
	if t.overflow {
		return nil, 0, fmt.Errorf("%w: headers of a sparse entry longer than %d bytes", ErrCorrupt, maxHeaderRecord)
	}
	start := (-t.recFrom) & (tarBlock - 1) // the first header block is block-aligned
	if start > int64(len(t.rec)) {
		return nil, 0, fmt.Errorf("%w: sparse entry: header not found", ErrCorrupt)
	}
	regs, stored, err := parseSparse(t.rec[start:], hdr)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: sparse map: %w", ErrCorrupt, err)
	}
	var data int64
	for _, r := range regs {
		data += r.Len
	}
	if data != stored {
		return nil, 0, fmt.Errorf("%w: sparse map covers %d bytes, the entry stores %d", ErrCorrupt, data, stored)
	}
	return regs, stored, nil
}

// parseSparse finds the entry's own header in b (the block-aligned header
// bytes of one entry, PAX and long-name records first) and returns its
// sparse map and the number of data bytes the entry stores after it.
func parseSparse(b []byte, hdr *tar.Header) ([]sink.Region, int64, error) {
	for {
		if len(b) < tarBlock {
			return nil, 0, fmt.Errorf("header block not found")
		}
		size, err := tarNumber(b[124:136])
		if err != nil {
			return nil, 0, fmt.Errorf("size field: %w", err)
		}
		switch b[156] {
		case tar.TypeXHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
			n := tarBlock + size + pad(size)
			if size > int64(len(b)) || n > int64(len(b)) {
				return nil, 0, fmt.Errorf("record of %d bytes past the header data", size)
			}
			b = b[n:]
			continue
		}
		if s, ok := hdr.PAXRecords["size"]; ok {
			if size, err = strconv.ParseInt(s, 10, 64); err != nil || size < 0 {
				return nil, 0, fmt.Errorf("PAX size %q", s)
			}
		}
		switch {
		case hdr.Typeflag == tar.TypeGNUSparse:
			regs, err := oldGNUSparseMap(b)
			return regs, size, err
		case hdr.PAXRecords["GNU.sparse.major"] == "1":
			regs, n, err := pax1SparseMap(b[tarBlock:])
			if err != nil {
				return nil, 0, err
			}
			if n > size {
				return nil, 0, fmt.Errorf("map of %d bytes in an entry of %d", n, size)
			}
			return regs, size - n, nil
		default:
			regs, err := pax0SparseMap(hdr.PAXRecords["GNU.sparse.map"])
			return regs, size, err
		}
	}
}

// maxSparseRegions bounds a map's entries (archive/tar's own bound on the
// map's bytes is lower in practice).
const maxSparseRegions = 1 << 20

// oldGNUSparseMap reads the map of an old GNU 'S' header block b and its
// extension blocks: 4 entries in the header at 386 (offset, numbytes: 12
// bytes each), isextended at 482; then 21 entries per extension block,
// isextended at 504.
func oldGNUSparseMap(b []byte) ([]sink.Region, error) {
	var regs []sink.Region
	ents, more := b[386:482], b[482]
	for {
		for e := 0; e+24 <= len(ents); e += 24 {
			if ents[e] == 0 {
				break
			}
			off, err1 := tarNumber(ents[e : e+12])
			n, err2 := tarNumber(ents[e+12 : e+24])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("entry %d: bad number", len(regs))
			}
			if len(regs) >= maxSparseRegions {
				return nil, fmt.Errorf("more than %d regions", maxSparseRegions)
			}
			regs = append(regs, sink.Region{Off: off, Len: n})
		}
		if more == 0 {
			return regs, nil
		}
		b = b[tarBlock:]
		if len(b) < tarBlock {
			return nil, fmt.Errorf("extension block missing")
		}
		ents, more = b[:504], b[504]
	}
}

// pax1SparseMap reads a PAX 1.0 map ("count\n" then "offset\nlength\n" per
// region, in decimal) from the start of b and returns the bytes it takes,
// padded to a block.
func pax1SparseMap(b []byte) ([]sink.Region, int64, error) {
	pos := 0
	token := func() (int64, error) {
		i := strings.IndexByte(string(b[pos:min(len(b), pos+32)]), '\n')
		if i < 0 {
			return 0, fmt.Errorf("map truncated at byte %d", pos)
		}
		v, err := strconv.ParseInt(string(b[pos:pos+i]), 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("map number %q", b[pos:pos+i])
		}
		pos += i + 1
		return v, nil
	}
	n, err := token()
	if err != nil {
		return nil, 0, err
	}
	if n > maxSparseRegions {
		return nil, 0, fmt.Errorf("%d regions, more than %d", n, maxSparseRegions)
	}
	regs := make([]sink.Region, 0, min(n, int64(len(b)/4)))
	for range n {
		off, err := token()
		if err != nil {
			return nil, 0, err
		}
		l, err := token()
		if err != nil {
			return nil, 0, err
		}
		regs = append(regs, sink.Region{Off: off, Len: l})
	}
	used := int64(pos)
	return regs, used + pad(used), nil
}

// pax0SparseMap reads GNU.sparse.map ("offset,length,…"; archive/tar turns
// PAX 0.0's repeated offset/numbytes records into it too).
func pax0SparseMap(s string) ([]sink.Region, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, ",")
	if len(f)%2 != 0 || len(f)/2 > maxSparseRegions {
		return nil, fmt.Errorf("GNU.sparse.map of %d numbers", len(f))
	}
	regs := make([]sink.Region, 0, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		off, err1 := strconv.ParseInt(f[i], 10, 64)
		n, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || off < 0 || n < 0 {
			return nil, fmt.Errorf("GNU.sparse.map entry %q,%q", f[i], f[i+1])
		}
		regs = append(regs, sink.Region{Off: off, Len: n})
	}
	return regs, nil
}

// tarNumber parses a tar numeric field: octal text (spaces and NULs
// around it) or GNU's base-256 (high bit of the first byte set). Negative
// and overflowing values are errors.
func tarNumber(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		if b[0]&0x40 != 0 {
			return 0, fmt.Errorf("negative base-256 number")
		}
		var x uint64
		for i, c := range b {
			if i == 0 {
				c &= 0x7f
			}
			if x>>55 != 0 {
				return 0, fmt.Errorf("base-256 number overflows")
			}
			x = x<<8 | uint64(c)
		}
		return int64(x), nil
	}
	s := strings.Trim(string(b), " \x00")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 8, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("octal %q", s)
	}
	return v, nil
}
