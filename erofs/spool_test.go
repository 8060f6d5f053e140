package erofs

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestSpool writes across chunk boundaries, fails a short write in the
// middle, spills to a file past the limit, and reads everything back.
func TestSpool(t *testing.T) {
	s := &spool{dir: t.TempDir(), limit: 3*chunkSize + 100}
	defer s.close()
	var want []byte
	var offs []int64
	for i, n := range []int{10, chunkSize - 5, 20, chunkSize, 1, 2 * chunkSize} {
		if i == 3 {
			// A short reader leaves nothing behind.
			if _, err := s.add(strings.NewReader("abc"), 10); err == nil {
				t.Fatal("short read accepted")
			}
		}
		d := payload(uint64(i), n)
		off, err := s.add(bytes.NewReader(d), int64(n))
		if err != nil {
			t.Fatal(err)
		}
		if off != int64(len(want)) {
			t.Fatalf("add %d at %d, want %d", i, off, len(want))
		}
		offs = append(offs, off)
		want = append(want, d...)
	}
	if s.f == nil {
		t.Fatal("did not spill to a file past the limit")
	}
	got, err := io.ReadAll(io.NewSectionReader(s, 0, s.size))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, err %v; want %d bytes", len(got), err, len(want))
	}
	m := &spool{limit: 1 << 40}
	for _, n := range []int{chunkSize - 1, 2, 7} {
		m.add(bytes.NewReader(make([]byte, n)), int64(n))
	}
	buf := make([]byte, 4)
	if n, err := m.ReadAt(buf, chunkSize-2); n != 4 || err != nil {
		t.Fatalf("read across chunks: %d %v", n, err)
	}
	if n, err := m.ReadAt(buf, m.size-2); n != 2 || err != io.EOF {
		t.Fatalf("read at the end: %d %v", n, err)
	}
}

// TestSpoolAddFile: whole files start on a block boundary once spooled to
// the file (in memory they pack), and read back exactly.
func TestSpoolAddFile(t *testing.T) {
	s := &spool{dir: t.TempDir(), limit: 10000}
	defer s.close()
	type put struct {
		off  int64
		data []byte
	}
	var puts []put
	for i, n := range []int{100, 5000, 7000, 1, 0, 4096, 3} {
		d := payload(uint64(i), n)
		off, err := s.addFile(bytes.NewReader(d), int64(n))
		if err != nil {
			t.Fatal(err)
		}
		if s.f != nil && n > 0 && off%4096 != 0 {
			t.Errorf("file %d (%d bytes) spooled at %d, not block-aligned", i, n, off)
		}
		puts = append(puts, put{off, d})
	}
	if s.f == nil || puts[1].off != 100 {
		t.Fatalf("spool file %v, second file at %d: want memory packing first, then a file", s.f, puts[1].off)
	}
	for i, p := range puts {
		got := make([]byte, len(p.data))
		if _, err := s.ReadAt(got, p.off); err != nil || !bytes.Equal(got, p.data) {
			t.Errorf("file %d at %d: read back wrong (%v)", i, p.off, err)
		}
	}
}
