package overlay

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"z.gfire.dev/gvx/sink"
)

// The read side of a walk runs in its own goroutine.
//
// A reader goroutine reads, decompresses and parses the archive, prepares
// each header for the sink (walker.prepare: the path, the limits, the sink
// header; it reads nothing but the header) and reads each entry's data
// into slabs; the caller's goroutine applies the entries to the sink. With two cores the archive's page-cache copy and tar parsing
// overlap the sink's allocation and writes. Both sides see the entries in
// archive order: the sink is only ever called from the caller's goroutine.
//
// Memory is bounded: data travels in at most slabCount slabs of slabSize
// bytes (several small entries share one; an entry larger than a slab
// comes in pieces), and the queue holds at most queueLen batches of up to
// batchLen messages. Messages go in batches so that the two goroutines
// hand over (and wake each other) once per batch, not once per entry
// (and a batch the sink side is done with goes back for reuse); a
// batch is sent when full, before the reader waits for a free slab, and at
// the end, so a slow input delays entries but never stalls the walk. When
// the sink side stops (an error), the reader is told to stop and the walk
// waits for it, so the caller's reader is never read after the walk
// returns.

const (
	slabSize  = 1 << 20
	slabCount = 8
	batchLen  = 64
	queueLen  = 8
)

// slab is a buffer of entry data; it goes back to the free list when the
// last piece cut from it is consumed.
type slab struct {
	b    []byte
	refs atomic.Int32
	free chan *slab
}

func (s *slab) release() {
	if s.refs.Add(-1) == 0 {
		s.free <- s
	}
}

// piece is one message of the queue: an entry's header (hdr set), a piece
// of its data (data set), or the end of its data (end set, with the
// error that ended it, if any). A header error has hdr nil and err set.
type piece struct {
	hdr *tar.Header
	// prep is hdr prepared by the walker (walk.go), in the reader
	// goroutine.
	prep entryPrep
	// regs is a sparse hdr's checked data map (nil for other entries):
	// the data that follows is the regions' bytes in order.
	regs   []sink.Region
	sparse bool
	// hdrErr refuses the entry hdr itself (a bad sparse map).
	hdrErr error
	data   []byte
	slab   *slab
	end    bool
	err    error
}

// readAhead is the reader goroutine's state.
type readAhead struct {
	tap   *tarTap
	tr    *tar.Reader
	prep  func(*tar.Header) entryPrep
	q     chan []piece
	batch []piece      // messages not yet sent
	spare chan []piece // batches the sink side is done with, for reuse
	stop  chan struct{}
	free  chan *slab
	cur   *slab
	off   int
	stopd bool
}

// errStopped ends the reader goroutine when the sink side gave up.
var errStopped = errors.New("overlay: walk stopped")

// send queues p unless the walk was stopped.
func (ra *readAhead) send(p piece) error {
	ra.batch = append(ra.batch, p)
	if len(ra.batch) < batchLen {
		return nil
	}
	return ra.flush()
}

// flush sends the batch.
func (ra *readAhead) flush() error {
	if len(ra.batch) == 0 {
		return nil
	}
	select {
	case ra.q <- ra.batch:
		select {
		case b := <-ra.spare:
			ra.batch = b
		default:
			ra.batch = make([]piece, 0, batchLen)
		}
		return nil
	case <-ra.stop:
		releaseAll(ra.batch)
		ra.batch = nil
		return errStopped
	}
}

// releaseAll drops the slab references of pieces nobody will read.
func releaseAll(ps []piece) {
	for _, p := range ps {
		if p.slab != nil {
			p.slab.release()
		}
	}
}

// space returns a buffer of up to want bytes (at least one) in the
// current slab, taking a fresh slab when the current one has not room for
// want (up to a whole slab).
func (ra *readAhead) space(want int64) ([]byte, error) {
	want = min(want, slabSize)
	if ra.cur == nil || int64(len(ra.cur.b)-ra.off) < want {
		if ra.cur != nil {
			ra.cur.release() // the reader's own reference
			ra.cur = nil
		}
		var s *slab
		select {
		case s = <-ra.free:
		default:
			// The slabs are all in flight, some maybe in the batch: send
			// it so the sink side can free them, then wait.
			if err := ra.flush(); err != nil {
				return nil, err
			}
			select {
			case s = <-ra.free:
			case <-ra.stop:
				return nil, errStopped
			}
		}
		s.refs.Store(1)
		ra.cur, ra.off = s, 0
	}
	return ra.cur.b[ra.off : ra.off+int(want)], nil
}

// run reads the archive to its end or first error.
func (ra *readAhead) run() {
	defer func() {
		ra.flush()
		close(ra.q)
	}()
	for {
		hdr, err := ra.tap.next(ra.tr)
		if err != nil {
			if err != io.EOF {
				ra.send(piece{err: err})
			}
			return
		}
		if !isSparse(hdr) {
			if ra.send(piece{hdr: hdr, prep: ra.prep(hdr)}) != nil {
				return
			}
			want := int64(-1) // read to the entry's end
			if hdr.Typeflag == tar.TypeReg {
				want = hdr.Size
			}
			if ra.pump(ra.tr, want) != nil {
				return
			}
			continue
		}
		regs, stored, err := ra.tap.sparseMap(hdr)
		if err == nil {
			if _, err = sink.NewSparse(hdr.Size, regs, nil); err != nil {
				err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
		}
		if err != nil {
			ra.send(piece{hdr: hdr, hdrErr: err})
			return
		}
		if ra.send(piece{hdr: hdr, prep: ra.prep(hdr), regs: regs, sparse: true}) != nil {
			return
		}
		// The stored bytes come from the archive directly and are owed
		// to tar.Reader (tar_sparse.go).
		if ra.pump(ra.tap.r, stored) != nil {
			return
		}
		ra.tap.owed += stored
	}
}

// pump queues the data of the current entry from r: exactly n bytes (short
// is io.ErrUnexpectedEOF), or to io.EOF when n < 0. The end piece carries
// the error that ended the data early; a non-nil return stops run.
func (ra *readAhead) pump(r io.Reader, n int64) error {
	for done := int64(0); n < 0 || done < n; {
		want := int64(4096) // entries other than files rarely hold data
		if n >= 0 {
			want = n - done
		}
		buf, err := ra.space(want)
		if err != nil {
			return err
		}
		k, rerr := readSome(r, buf)
		if k > 0 {
			ra.cur.refs.Add(1)
			if err := ra.send(piece{data: buf[:k], slab: ra.cur}); err != nil {
				return err
			}
			ra.off += k
			done += int64(k)
		}
		if rerr == io.EOF && (n < 0 || done == n) {
			break // tar.Reader says io.EOF with an entry's last bytes
		}
		if rerr != nil {
			if rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			ra.send(piece{end: true, err: rerr})
			return rerr
		}
	}
	return ra.send(piece{end: true})
}

// readSome reads into p until it is full or r fails; io.EOF is passed on
// as it is (the entry's clean end), unlike io.ReadFull, which would make a
// partial read at the end look like the archive's truncation.
func readSome(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// entryStream is the sink side's reader of one entry's data. It implements
// io.WriterTo so a sink that takes one (ext4lite) writes straight from the
// slabs, without copying into a buffer of its own.
type entryStream struct {
	q    *pieceQueue
	cur  piece // the piece being read; cur.data what is left of it
	done bool
	err  error
}

// next moves to the next piece; false at the entry's end.
func (s *entryStream) next() bool {
	if s.cur.slab != nil {
		s.cur.slab.release()
		s.cur = piece{}
	}
	if s.done {
		return false
	}
	p, ok := s.q.pop()
	if !ok {
		// The reader never closes mid-entry without an end piece.
		s.done, s.err = true, io.ErrUnexpectedEOF
		return false
	}
	if p.end {
		s.done, s.err = true, p.err
		return false
	}
	s.cur = p
	return true
}

func (s *entryStream) Read(p []byte) (int, error) {
	for len(s.cur.data) == 0 {
		if !s.next() {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur.data)
	s.cur.data = s.cur.data[n:]
	return n, nil
}

// WriteTo hands each piece to w as it is.
func (s *entryStream) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(s.cur.data) > 0 {
			n, err := w.Write(s.cur.data)
			total += int64(n)
			s.cur.data = s.cur.data[n:]
			if err != nil {
				return total, err
			}
		}
		if !s.next() {
			return total, s.err
		}
	}
}

// drain consumes what the sink left unread and returns the error that
// ended the data, if any.
func (s *entryStream) drain() error {
	for s.next() {
	}
	return s.err
}

// pieceQueue is the sink side's end of the queue.
type pieceQueue struct {
	c     <-chan []piece
	spare chan<- []piece
	last  []piece // the batch buf is the rest of
	buf   []piece
}

// pop returns the next message; false once the reader has finished. A
// batch read to its end goes back to the reader for reuse, so the walk
// allocates no batches once the queue is full.
func (q *pieceQueue) pop() (piece, bool) {
	for len(q.buf) == 0 {
		if q.last != nil {
			clear(q.last) // no references kept from a spare batch
			select {
			case q.spare <- q.last[:0]:
			default:
			}
			q.last = nil
		}
		b, ok := <-q.c
		if !ok {
			return piece{}, false
		}
		q.last, q.buf = b, b
	}
	p := q.buf[0]
	q.buf = q.buf[1:]
	return p, true
}

// startReadAhead starts the reader goroutine on tap, preparing each header
// with prep, and returns its queue and a function that stops it and waits
// until it has.
func startReadAhead(tap *tarTap, prep func(*tar.Header) entryPrep) (*pieceQueue, func()) {
	ra := &readAhead{tap: tap, tr: tar.NewReader(tap), prep: prep, q: make(chan []piece, queueLen),
		batch: make([]piece, 0, batchLen), spare: make(chan []piece, queueLen+2),
		stop: make(chan struct{}), free: make(chan *slab, slabCount)}
	for range slabCount {
		ra.free <- &slab{b: make([]byte, slabSize), free: ra.free}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ra.run()
	}()
	var once sync.Once
	return &pieceQueue{c: ra.q, spare: ra.spare}, func() {
		once.Do(func() {
			close(ra.stop)
			// Unblock a reader waiting to send, then wait for it.
			go func() {
				for b := range ra.q {
					releaseAll(b)
				}
			}()
			wg.Wait()
		})
	}
}
