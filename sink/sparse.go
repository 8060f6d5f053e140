package sink

import (
	"errors"
	"fmt"
	"io"
)

// Sparse is a regular file's contents given as data regions, as a sparse
// tar entry stores them: Size apparent bytes of which only Regions hold
// data, the regions' bytes coming one after the other from Data.
//
// Walkers hand a *Sparse to Sink.WriteFile as its reader. As an io.Reader
// it yields the whole file, holes as zeros, so every sink can take it;
// sinks that know it (ext4lite, the EROFS builder, sink/hostdir) type-assert
// it and read only the data with WriteRegions: time and I/O linear in the
// data, not in the apparent size (a 1 TiB sparse file with 1 MiB of data
// costs 1 MiB). A sink uses one of the two views, never both.
type Sparse struct {
	size    int64
	regions []Region
	data    io.Reader

	pos  int64 // apparent position of Read
	next int   // first region not wholly read by Read
}

// ErrBadSparseMap reports data regions that are not in order, overlap,
// have a negative offset or length, or end past the file's size.
var ErrBadSparseMap = errors.New("sink: bad sparse map")

// NewSparse returns the file of size bytes whose data regions are regions
// (in file order, not overlapping, within size; empty ones are dropped),
// their bytes read from data in that order. A bad map is an error wrapping
// ErrBadSparseMap.
func NewSparse(size int64, regions []Region, data io.Reader) (*Sparse, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrBadSparseMap, size)
	}
	rs := make([]Region, 0, len(regions))
	var end int64
	for _, r := range regions {
		if r.Off < end || r.Len < 0 || r.Len > size-r.Off {
			return nil, fmt.Errorf("%w: region %d+%d after byte %d of a %d-byte file", ErrBadSparseMap, r.Off, r.Len, end, size)
		}
		if r.Len > 0 {
			rs = append(rs, r)
			end = r.Off + r.Len
		}
	}
	return &Sparse{size: size, regions: rs, data: data}, nil
}

// Size returns the apparent size.
func (s *Sparse) Size() int64 { return s.size }

// Regions returns the data regions, non-empty, in file order.
func (s *Sparse) Regions() []Region { return s.regions }

// DataSize returns the bytes of data: the sum of the regions' lengths.
func (s *Sparse) DataSize() int64 {
	var n int64
	for _, r := range s.regions {
		n += r.Len
	}
	return n
}

// WriteRegions calls write for each region in order with a reader of
// exactly its bytes, which write must consume whole (short input is
// io.ErrUnexpectedEOF). It is the view sinks use to skip holes.
func (s *Sparse) WriteRegions(write func(off int64, r io.Reader, n int64) error) error {
	for _, rg := range s.regions {
		cr := &countReader{r: io.LimitReader(s.data, rg.Len)}
		if err := write(rg.Off, cr, rg.Len); err != nil {
			return err
		}
		if cr.n != rg.Len {
			return fmt.Errorf("sparse region at %d: got %d of %d bytes: %w", rg.Off, cr.n, rg.Len, io.ErrUnexpectedEOF)
		}
	}
	return nil
}

// Read reads the apparent contents: zeros in the holes.
func (s *Sparse) Read(p []byte) (int, error) {
	if s.pos >= s.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.size-s.pos)]
	for s.next < len(s.regions) && s.regions[s.next].Off+s.regions[s.next].Len <= s.pos {
		s.next++
	}
	if s.next == len(s.regions) || s.pos < s.regions[s.next].Off {
		hole := s.size - s.pos
		if s.next < len(s.regions) {
			hole = s.regions[s.next].Off - s.pos
		}
		n := int(min(int64(len(p)), hole))
		clear(p[:n])
		s.pos += int64(n)
		return n, nil
	}
	rg := s.regions[s.next]
	n, err := s.data.Read(p[:min(int64(len(p)), rg.Off+rg.Len-s.pos)])
	s.pos += int64(n)
	if err == io.EOF {
		err = nil
		if s.pos < rg.Off+rg.Len {
			err = io.ErrUnexpectedEOF // the data ended inside a region
		}
	}
	return n, err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
