package cliutil

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestProgress: the first write draws the line with size and percentage,
// writes within 100 ms of a draw do not redraw, Set past the throttle
// does, and Finish erases the line (and only once).
func TestProgress(t *testing.T) {
	var out bytes.Buffer
	p := NewProgress(&out, "importing x.tar", 4<<20)
	if _, err := io.Copy(p, io.LimitReader(zeros{}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	first := out.String()
	if !strings.HasPrefix(first, "\rimporting x.tar ") || !strings.Contains(first, "/ 4.0MiB") || !strings.HasSuffix(first, "\x1b[K") {
		t.Fatalf("first draw %q", first)
	}
	if strings.Count(first, "\r") != 1 {
		t.Fatalf("%d draws within the throttle interval: %q", strings.Count(first, "\r"), first)
	}
	p.last = p.last.Add(-progressEvery) // as if 100 ms had passed
	p.Set(2 << 20)
	if got := out.String()[len(first):]; !strings.Contains(got, "2.0MiB / 4.0MiB (50%)") {
		t.Fatalf("redraw %q", got)
	}
	n := out.Len()
	p.Finish()
	p.Finish()
	if got := out.String()[n:]; got != "\r\x1b[K" {
		t.Fatalf("Finish wrote %q", got)
	}
	var none bytes.Buffer
	q := NewProgress(&none, "x", -1)
	q.Finish()
	if none.Len() != 0 {
		t.Fatalf("Finish of an undrawn line wrote %q", none.String())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
