package erofs

import (
	"fmt"
	"io"
	"os"

	"z.gfire.dev/gvx/erofs/internal/disk"
)

// spool keeps the builder's file contents: in memory up to limit bytes,
// then in one unlinked-on-Close temporary file, so a big tree costs disk,
// not RAM.
type spool struct {
	dir   string
	limit int64
	mem   [][]byte // chunks of chunkSize (the last may be shorter)
	f     *os.File
	size  int64
	buf   []byte // copying into f
}

// copyBuf is the spool file's copy buffer: perf of a tar build showed
// os.File.ReadFrom's 32 KiB copies (a read and a write syscall each) as
// most of the spooling cost.
const copyBuf = 1 << 20

// chunkSize is the unit of the in-memory spool: big trees grow by chunks
// instead of re-copying one ever larger slice.
const chunkSize = 4 << 20

// addFile appends a whole dense file: like add, but in the spool file it
// starts on a block boundary, so copy_file_range into the image moves
// whole pages (and reflinks them where the filesystem shares blocks).
func (s *spool) addFile(r io.Reader, n int64) (int64, error) {
	if s.f != nil || s.size+n > s.limit {
		if err := s.toFile(); err != nil {
			return 0, err
		}
		if pad := (s.size+disk.BlockSize-1)&^(disk.BlockSize-1) - s.size; pad > 0 && n > 0 {
			if _, err := s.f.Seek(pad, io.SeekCurrent); err != nil {
				return 0, fmt.Errorf("erofs: spooling file data: %w", err)
			}
			s.size += pad // a hole
		}
	}
	return s.add(r, n)
}

// toFile moves the spool to its temporary file.
func (s *spool) toFile() error {
	if s.f != nil {
		return nil
	}
	f, err := os.CreateTemp(s.dir, "gvx-erofs-spool-*")
	if err != nil {
		return fmt.Errorf("erofs: spooling file data: %w", err)
	}
	for _, c := range s.mem {
		if _, err := f.Write(c); err != nil {
			f.Close()
			os.Remove(f.Name())
			return fmt.Errorf("erofs: spooling file data: %w", err)
		}
	}
	s.f, s.mem = f, nil
	return nil
}

// add appends exactly n bytes read from r and returns their offset.
func (s *spool) add(r io.Reader, n int64) (int64, error) {
	off := s.size
	if n == 0 {
		return off, nil
	}
	if s.f == nil && s.size+n <= s.limit {
		for done := int64(0); done < n; {
			if len(s.mem) == 0 || len(s.mem[len(s.mem)-1]) == chunkSize {
				s.mem = append(s.mem, make([]byte, 0, chunkSize))
			}
			last := &s.mem[len(s.mem)-1]
			m := min(n-done, int64(chunkSize-len(*last)))
			start := len(*last)
			*last = (*last)[:start+int(m)]
			if _, err := io.ReadFull(r, (*last)[start:]); err != nil {
				s.truncateMem(off)
				return 0, shortRead(err, n)
			}
			done += m
		}
		s.size += n
		return off, nil
	}
	if err := s.toFile(); err != nil {
		return 0, err
	}
	if s.buf == nil {
		s.buf = make([]byte, copyBuf)
	}
	// Not f.ReadFrom: it would copy 32 KiB at a time.
	got, err := io.CopyBuffer(struct{ io.Writer }{s.f}, io.LimitReader(r, n), s.buf)
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		// Keep the file consistent with s.size for later appends.
		if terr := s.f.Truncate(off); terr != nil {
			return 0, terr
		}
		if _, serr := s.f.Seek(off, io.SeekStart); serr != nil {
			return 0, serr
		}
		return 0, shortRead(err, n)
	}
	s.size += n
	return off, nil
}

func shortRead(err error, n int64) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes of file data: %w", n, err)
}

// ReadAt reads spooled bytes.
func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.ReadAt(p, off)
	}
	n := 0
	for n < len(p) && off < s.size {
		c := s.mem[off/chunkSize]
		m := copy(p[n:], c[off%chunkSize:])
		n += m
		off += int64(m)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// truncateMem drops in-memory data from off on (a failed add).
func (s *spool) truncateMem(off int64) {
	k := int((off + chunkSize - 1) / chunkSize)
	if off%chunkSize == 0 {
		k = int(off / chunkSize)
	}
	s.mem = s.mem[:k]
	if rem := off % chunkSize; rem != 0 {
		s.mem[k-1] = s.mem[k-1][:rem]
	}
}

func (s *spool) close() error {
	s.mem, s.buf = nil, nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if rerr := os.Remove(s.f.Name()); err == nil {
		err = rerr
	}
	s.f = nil
	return err
}
