package serve

import (
	"bytes"
	"fmt"
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
