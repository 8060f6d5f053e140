package serve

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestTailKeepsTheEnd: whatever the sizes of the writes, the tail holds
// the last limit bytes (at least) and shows the last 2 KiB of them.
func TestTailKeepsTheEnd(t *testing.T) {
	var all bytes.Buffer
	tl := &tail{limit: 4096}
	for i, n := range []int{1, 7, 4095, 4096, 4097, 1, 3000, 9000, 2, 1} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		for j := range b {
			b[j] += byte(j % 3) // not all alike, so an offset error shows
		}
		tl.Write(b)
		all.Write(b)
		if len(tl.buf) > 2*tl.limit {
			t.Fatalf("after %d writes the tail holds %d bytes, over twice its limit %d", i+1, len(tl.buf), tl.limit)
		}
		want := all.Bytes()[max(all.Len()-tl.limit, 0):]
		if !bytes.HasSuffix(tl.buf, want) {
			t.Fatalf("after %d writes the tail does not end with the last %d bytes written", i+1, len(want))
		}
		show := all.Bytes()[max(all.Len()-2<<10, 0):]
		if tl.String() != string(show) {
			t.Fatalf("after %d writes String() is not the last 2 KiB", i+1)
		}
	}
}

// BenchmarkTailByteWrites: a guest's output arriving a byte at a time, into
// a full tail (the server's 64 KiB).
func BenchmarkTailByteWrites(b *testing.B) {
	for _, n := range []int{1, 512} {
		b.Run(fmt.Sprintf("write=%d", n), func(b *testing.B) {
			tl := &tail{limit: outputLimit}
			tl.Write(make([]byte, outputLimit))
			p := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				tl.Write(p)
			}
		})
	}
}

// TestTailSince: a reader that follows the tail gets every byte once, in
// order, while it keeps up; one that fell behind gets what is kept and
// is told how much it lost; the channel is closed by the next write.
func TestTailSince(t *testing.T) {
	tl := &tail{limit: 16}
	b, off, lost, more := tl.since(-1, 64)
	if len(b) != 0 || off != 0 || lost != 0 {
		t.Fatalf("empty tail: %q %d %d", b, off, lost)
	}
	tl.Write([]byte("hello "))
	select {
	case <-more:
	default:
		t.Fatal("a write did not wake the reader")
	}
	var got []byte
	for _, w := range []string{"world", "!", "0123456789"} {
		b, off, lost, _ = tl.since(off, 4) // small reads: more than one per write
		got = append(got, b...)
		for len(b) > 0 {
			b, off, _, _ = tl.since(off, 4)
			got = append(got, b...)
		}
		if lost != 0 {
			t.Fatalf("a reader that kept up lost %d", lost)
		}
		tl.Write([]byte(w))
	}
	for b, off, _, _ = tl.since(off, 4); len(b) > 0; b, off, _, _ = tl.since(off, 4) {
		got = append(got, b...)
	}
	if string(got) != "hello world!0123456789" {
		t.Fatalf("followed %q", got)
	}
	tl.Write(bytes.Repeat([]byte("x"), 40))
	b, next, lost, _ := tl.since(off, 64)
	if lost != 40-16 || string(b) != strings.Repeat("x", 16) || next != off+40 {
		t.Fatalf("behind by 40 with 16 kept: %q, lost %d, next %d (from %d)", b, lost, next, off)
	}
	if b, _, _, _ := tl.since(-1, 64); string(b) != strings.Repeat("x", 16) {
		t.Fatalf("the tail from the start: %q", b)
	}
}
