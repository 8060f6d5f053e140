package erofs

import (
	"fmt"
	"io"
	"os"
)

// spool keeps the builder's file contents: in memory up to limit bytes,
// then in one unlinked-on-Close temporary file, so a big tree costs disk,
// not RAM.
type spool struct {
	dir   string
	limit int64
	mem   []byte
	f     *os.File
	size  int64
}

// add appends exactly n bytes read from r and returns their offset.
func (s *spool) add(r io.Reader, n int64) (int64, error) {
	off := s.size
	if n == 0 {
		return off, nil
	}
	if s.f == nil && s.size+n <= s.limit {
		s.mem = append(s.mem, make([]byte, n)...)
		if _, err := io.ReadFull(r, s.mem[off:off+n]); err != nil {
			s.mem = s.mem[:off]
			return 0, shortRead(err, n)
		}
		s.size += n
		return off, nil
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "gvx-erofs-spool-*")
		if err != nil {
			return 0, fmt.Errorf("erofs: spooling file data: %w", err)
		}
		if _, err := f.Write(s.mem); err != nil {
			f.Close()
			os.Remove(f.Name())
			return 0, fmt.Errorf("erofs: spooling file data: %w", err)
		}
		s.f, s.mem = f, nil
	}
	got, err := io.Copy(s.f, io.LimitReader(r, n))
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
	if off >= int64(len(s.mem)) {
		return 0, io.EOF
	}
	n := copy(p, s.mem[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (s *spool) close() error {
	s.mem = nil
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
