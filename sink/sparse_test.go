package sink

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestSparseRead: the apparent view of a sparse file is its data at the
// regions' offsets and zeros elsewhere, to the size.
func TestSparseRead(t *testing.T) {
	regs := []Region{{Off: 3, Len: 2}, {Off: 5, Len: 1}, {Off: 10, Len: 0}, {Off: 12, Len: 3}}
	want := []byte{0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0, 0, 0, 'd', 'e', 'f', 0, 0}
	sp, err := NewSparse(int64(len(want)), regs, bytes.NewReader([]byte("abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sp.Regions()); n != 3 {
		t.Errorf("%d regions kept, want 3 (the empty one dropped)", n)
	}
	if sp.DataSize() != 6 {
		t.Errorf("DataSize = %d, want 6", sp.DataSize())
	}
	if err := iotest.TestReader(sp, want); err != nil {
		t.Error(err)
	}
}

// TestSparseWriteRegions: each region's reader yields exactly its bytes;
// a data stream shorter than the map is io.ErrUnexpectedEOF, in either view.
func TestSparseWriteRegions(t *testing.T) {
	regs := []Region{{Off: 0, Len: 2}, {Off: 1 << 40, Len: 3}}
	sp, _ := NewSparse(1<<41, regs, bytes.NewReader([]byte("xyzzy")))
	var got []string
	err := sp.WriteRegions(func(off int64, r io.Reader, n int64) error {
		b, err := io.ReadAll(r)
		got = append(got, string(b))
		return err
	})
	if err != nil || len(got) != 2 || got[0] != "xy" || got[1] != "zzy" {
		t.Errorf("WriteRegions gave %q, %v", got, err)
	}
	short, _ := NewSparse(1<<41, regs, bytes.NewReader([]byte("xyz")))
	if err := short.WriteRegions(func(int64, io.Reader, int64) error { return nil }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short data: WriteRegions = %v, want io.ErrUnexpectedEOF", err)
	}
	short, _ = NewSparse(10, []Region{{Off: 2, Len: 5}}, bytes.NewReader([]byte("xyz")))
	if _, err := io.ReadAll(short); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short data: Read = %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestSparseBadMap: maps out of order, overlapping, negative or past the
// size are refused.
func TestSparseBadMap(t *testing.T) {
	for _, tc := range []struct {
		size int64
		regs []Region
	}{
		{-1, nil},
		{10, []Region{{Off: 5, Len: 2}, {Off: 1, Len: 1}}},
		{10, []Region{{Off: 1, Len: 5}, {Off: 5, Len: 1}}},
		{10, []Region{{Off: -1, Len: 2}}},
		{10, []Region{{Off: 1, Len: -1}}},
		{10, []Region{{Off: 8, Len: 3}}},
		{10, []Region{{Off: 1, Len: 1<<63 - 1}}},
	} {
		if _, err := NewSparse(tc.size, tc.regs, nil); !errors.Is(err, ErrBadSparseMap) {
			t.Errorf("NewSparse(%d, %v) = %v, want ErrBadSparseMap", tc.size, tc.regs, err)
		}
	}
}
