package erofs

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"z.gfire.dev/gvx/erofs/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// The parallel writer: the plan fixes every byte's offset, so workers
// write disjoint ranges of the file in any order and the image is the
// same for any number of them.
const (
	runBuf     = 1 << 20   // a worker's buffer of small files' blocks
	batchBytes = 4 << 20   // about this much data per unit of work
	directMin  = 256 << 10 // spans this long skip the buffer (copy_file_range)
)

// batchInodes is the most inodes in a unit of work (a variable for the
// tests, which make many small units).
var batchInodes = 512

// writeAt writes the image into f at base: data by the workers, then the
// metadata (with the tails they read) and superblock. With writeback, each
// unit of work's blocks are handed to the disk when it is done.
func (b *Builder) writeAt(f *os.File, base int64, p *plan, writeback bool) (int64, error) {
	meta, err := b.encodeMeta(p, false)
	if err != nil {
		return 0, err
	}
	total := int64(p.blocks) * disk.BlockSize
	// Fresh zeros past base: whatever no one writes (padding, holes of
	// sparse files) reads as zeros and costs no disk.
	if err := f.Truncate(base); err != nil {
		return 0, fmt.Errorf("erofs: %w", err)
	}
	if err := f.Truncate(base + total); err != nil {
		return 0, fmt.Errorf("erofs: %w", err)
	}
	batches := batchInodesOf(p)
	var next atomic.Int64
	errs := make([]error, b.workers())
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &runWriter{f: f, buf: make([]byte, 0, runBuf)}
			dc := newDirCache()
			defer dc.close()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(batches) || errs[i] != nil {
					break
				}
				for _, n := range batches[k] {
					if errs[i] = b.writeData(w, dc, base, meta, n); errs[i] != nil {
						break
					}
				}
				// Before the next batch: its gap padding must not
				// cover the batches other workers write.
				if err := w.flush(); errs[i] == nil {
					errs[i] = err
				}
				if writeback && errs[i] == nil {
					if off, n := batchSpan(batches[k]); n > 0 {
						startWriteback(f, base+off, n)
					}
				}
			}
			if errs[i] != nil {
				next.Store(int64(len(batches))) // the others stop too
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	b.putSuper(meta, p)
	if _, err := f.WriteAt(meta, base); err != nil {
		return 0, fmt.Errorf("erofs: %w", err)
	}
	if area := xattrArea(p); area != nil {
		if _, err := f.WriteAt(area, base+int64(p.xattrBlk)*disk.BlockSize); err != nil {
			return 0, fmt.Errorf("erofs: %w", err)
		}
	}
	if _, err := f.Seek(base+total, io.SeekStart); err != nil {
		return 0, fmt.Errorf("erofs: %w", err)
	}
	b.finishReport(p, total)
	return total, nil
}

// batchInodesOf splits the inodes that have data blocks or a regular
// file's tail into runs of consecutive ones, the workers' units.
func batchInodesOf(p *plan) [][]*inode {
	var out [][]*inode
	var cur []*inode
	var bytes int64
	for _, n := range p.inodes {
		if n.l.nblocks == 0 && !(n.l.tail > 0 && n.mode&sink.TypeMask == sink.TypeReg) {
			continue
		}
		cur = append(cur, n)
		bytes += n.l.nblocks*disk.BlockSize + int64(n.l.tail)
		if bytes >= batchBytes || len(cur) >= batchInodes {
			out = append(out, cur)
			cur, bytes = nil, 0
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// batchSpan is the byte range a unit of work's data blocks cover (they
// are consecutive).
func batchSpan(ns []*inode) (off, n int64) {
	lo, hi := int64(-1), int64(0)
	for _, n := range ns {
		if n.l.nblocks == 0 {
			continue // a tail only, in the metadata
		}
		if lo < 0 {
			lo = int64(n.l.blkaddr)
		}
		hi = int64(n.l.blkaddr) + n.l.nblocks
	}
	if lo < 0 {
		return 0, 0
	}
	return lo * disk.BlockSize, (hi - lo) * disk.BlockSize
}

// writeData writes n's data blocks at their place and, for a regular
// file, reads its tail into meta.
func (b *Builder) writeData(w *runWriter, dc *dirCache, base int64, meta []byte, n *inode) error {
	l := &n.l
	at := base + int64(l.blkaddr)*disk.BlockSize
	switch n.mode & sink.TypeMask {
	case sink.TypeDir:
		for i, ents := range l.dir[:l.nblocks] {
			blk, err := w.reserve(at+int64(i)*disk.BlockSize, disk.BlockSize)
			if err != nil {
				return err
			}
			clear(blk)
			putDirBlock(blk, ents)
		}
		return nil
	case sink.TypeSymlink:
		blk, err := w.reserve(at, disk.BlockSize)
		if err != nil {
			return err
		}
		clear(blk)
		copy(blk, n.link)
		return nil
	}
	// Small and dense: read whole, in one pread for blocks and tail,
	// which also checks a host file ends where it was scanned.
	whole := n.regions == nil && n.size <= directMin
	c, err := b.contentIn(n, dc, whole)
	if err != nil {
		return err
	}
	defer c.close()
	m := n.size - int64(l.tail)
	tail := meta[tailOff(n):][:l.tail]
	if whole {
		var buf []byte
		if l.nblocks == 0 {
			buf, err = w.scratch(int(n.size) + 1) // all of it is the tail
		} else {
			buf, err = w.reserve(at, int(n.size)+1)
		}
		if err != nil {
			return err
		}
		if err := c.readWhole(buf); err != nil {
			return err
		}
		copy(tail, buf[m:n.size])
		if l.nblocks > 0 {
			w.unreserve(len(tail) + 1)
		}
		return nil
	}
	for _, s := range c.dataSpans(m, disk.BlockSize) {
		if err := b.copySpan(w, c, at+s.Off, s.Off, s.Len); err != nil {
			return err
		}
	}
	if len(tail) > 0 {
		return readFull(c, tail, m)
	}
	return nil
}

// copySpan puts c's bytes [off, off+n) at the file's offset dst.
func (b *Builder) copySpan(w *runWriter, c *content, dst, off, n int64) error {
	var src io.ReaderAt
	var fd uintptr
	var name string
	var srcOff int64
	switch {
	case c.host != nil:
		src, fd, name, srcOff = c.host, c.host.Fd(), c.host.Name(), off
	case c.regs == nil && c.s.f != nil:
		src, fd, name, srcOff = c.s.f, c.s.f.Fd(), c.s.f.Name(), c.off+off
	}
	if src != nil && n >= directMin {
		if err := w.flush(); err != nil {
			return err
		}
		if err := copyRange(w.f, dst, fd, src, srcOff, n); err != nil {
			return fmt.Errorf("erofs: copying file data from %s: %w", name, err)
		}
		return nil
	}
	for n > 0 {
		k := min(n, runBuf)
		buf, err := w.reserve(dst, int(k))
		if err != nil {
			return err
		}
		if err := readFull(c, buf, off); err != nil {
			return err
		}
		dst, off, n = dst+k, off+k, n-k
	}
	return nil
}

// readFull reads p, all inside the file, at off: a short read means the
// file shrank under us (a host file), never zeros or stale bytes.
func readFull(c *content, p []byte, off int64) error {
	n, err := c.ReadAt(p, off)
	if err == io.EOF && n < len(p) {
		err = c.shrank()
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("erofs: reading file data: %w", err)
	}
	return nil
}

// runWriter gathers runs of nearby bytes into one pwrite.
type runWriter struct {
	f   *os.File
	buf []byte
	off int64 // file offset of buf[0]
}

// maxGap is how many zero bytes reserve pads with rather than starting
// a new run.
const maxGap = 64 << 10

// reserve returns n bytes of the buffer that go to the file at off (n at
// most runBuf, off not before what is already reserved).
func (w *runWriter) reserve(off int64, n int) ([]byte, error) {
	end := w.off + int64(len(w.buf))
	if len(w.buf) > 0 && (off < end || off-end > maxGap || int64(len(w.buf))+off-end+int64(n) > int64(cap(w.buf))) {
		if err := w.flush(); err != nil {
			return nil, err
		}
	}
	if len(w.buf) == 0 {
		w.off = off
	}
	gap := int(off - (w.off + int64(len(w.buf))))
	k := len(w.buf)
	w.buf = w.buf[:k+gap+n]
	clear(w.buf[k : k+gap])
	return w.buf[k+gap:], nil
}

// scratch returns n bytes of the buffer past what is reserved, to read
// into and copy from before the next reserve (n at most runBuf).
func (w *runWriter) scratch(n int) ([]byte, error) {
	if len(w.buf)+n > cap(w.buf) {
		if err := w.flush(); err != nil {
			return nil, err
		}
	}
	return w.buf[len(w.buf) : len(w.buf)+n], nil
}

// unreserve gives back the last n bytes reserved.
func (w *runWriter) unreserve(n int) { w.buf = w.buf[:len(w.buf)-n] }

func (w *runWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return fmt.Errorf("erofs: %w", err)
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}
