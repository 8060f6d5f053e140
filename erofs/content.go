package erofs

import (
	"fmt"
	"io"
	"sort"

	"z.gfire.dev/gvx/sink"
)

// content is a regular file's bytes as the builder keeps them: dense, size
// bytes at off in the spool, or sparse, only the data regions' bytes there
// one after the other (what a sparse tar entry gives) and zeros elsewhere;
// or, for a file added by AddDir, the host file itself, opened here and
// checked to be the file that was scanned.
type content struct {
	s    *spool
	host *hostFD // AddDir's file (dense); nil: the spool
	off  int64
	size int64
	regs []sink.Region // nil: dense
	at   []int64       // spool offset of each region's bytes
}

// content opens n's bytes; close the result.
func (b *Builder) content(n *inode) (*content, error) { return b.contentIn(n, nil, false) }

// contentIn is content opening a host file through dc (one per worker).
// whole says the caller reads all of the file with readWhole, which
// checks a host file where it ends: then its open makes no fstat.
func (b *Builder) contentIn(n *inode, dc *dirCache, whole bool) (*content, error) {
	if n.host != nil {
		f, err := n.host.open(n.size, dc, !whole)
		if err != nil {
			return nil, err
		}
		return &content{host: f, size: n.size}, nil
	}
	c := &content{s: &b.spool, off: n.dataOff, size: n.size, regs: n.regions}
	if c.regs != nil {
		c.at = make([]int64, len(c.regs))
		o := c.off
		for i, r := range c.regs {
			c.at[i] = o
			o += r.Len
		}
	}
	return c, nil
}

// shrank is the error for a file that ended before its size.
func (c *content) shrank() error {
	if c.host != nil {
		return fmt.Errorf("%s shrank while the image was built (was %d bytes): build again from a tree nothing writes to", c.host.Name(), c.size)
	}
	return io.ErrUnexpectedEOF
}

// readWhole reads all of the file into p[:c.size]; p has one byte more,
// where a host file's read checks that the file ends at its scanned size
// (hostFD.readWhole).
func (c *content) readWhole(p []byte) error {
	if c.host != nil {
		return c.host.readWhole(p)
	}
	return readFull(c, p[:c.size], 0)
}

// close releases a host file.
func (c *content) close() error {
	if c.host == nil {
		return nil
	}
	return c.host.Close()
}

// ReadAt reads the file's bytes at off: holes read as zeros.
func (c *content) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.size {
		return 0, io.EOF
	}
	short := int64(len(p)) > c.size-off
	p = p[:min(int64(len(p)), c.size-off)]
	if c.host != nil {
		n, err := c.host.ReadAt(p, off)
		if err == io.EOF && n == len(p) {
			err = nil // a file that grew was caught by the open's check
		}
		if err == nil && short {
			err = io.EOF
		}
		return n, err
	}
	if c.regs == nil {
		n, err := c.s.ReadAt(p, c.off+off)
		if err == nil && short {
			err = io.EOF
		}
		return n, err
	}
	clear(p)
	end := off + int64(len(p))
	i := sort.Search(len(c.regs), func(i int) bool { return c.regs[i].Off+c.regs[i].Len > off })
	for ; i < len(c.regs) && c.regs[i].Off < end; i++ {
		r := c.regs[i]
		from, to := max(r.Off, off), min(r.Off+r.Len, end)
		if _, err := c.s.ReadAt(p[from-off:to-off], c.at[i]+from-r.Off); err != nil && err != io.EOF {
			return 0, err
		}
	}
	if short {
		return len(p), io.EOF
	}
	return len(p), nil
}

// dataSpans returns the block-aligned spans of [0, limit) that hold data,
// in order and merged: everything else is whole blocks of zeros.
func (c *content) dataSpans(limit, bs int64) []sink.Region {
	if c.regs == nil {
		return []sink.Region{{Off: 0, Len: limit}}
	}
	var out []sink.Region
	for _, r := range c.regs {
		s, e := r.Off&^(bs-1), min((r.Off+r.Len+bs-1)&^(bs-1), limit)
		if s >= e {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len >= s {
			out[k].Len = max(out[k].Len, e-out[k].Off)
			continue
		}
		out = append(out, sink.Region{Off: s, Len: e - s})
	}
	return out
}
