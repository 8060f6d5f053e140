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
