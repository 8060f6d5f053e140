package cliutil

import (
	"fmt"
	"io"
	"time"
)

// Progress draws one self-rewriting line on a terminal: a description, the
// bytes done of the total and a percentage, at most every 100 ms, cleared
// by Finish. It replaces a progress-bar library whose package
// initialisation (colour and Unicode width tables) every gvx-vol verb paid
// at start-up, clone included. Callers draw it only when the writer is a
// terminal.
type Progress struct {
	w     io.Writer
	desc  string
	total int64 // < 0: unknown
	done  int64
	last  time.Time
	drawn bool
}

// progressEvery is how often Progress redraws.
const progressEvery = 100 * time.Millisecond

// NewProgress returns a Progress for total bytes (< 0 if unknown) on w.
func NewProgress(w io.Writer, desc string, total int64) *Progress {
	return &Progress{w: w, desc: desc, total: total}
}

// Write counts len(p) bytes done (so a Progress can sit in an io.TeeReader).
func (p *Progress) Write(b []byte) (int, error) {
	p.Set(p.done + int64(len(b)))
	return len(b), nil
}

// Set records n bytes done and redraws if the last draw is old enough.
func (p *Progress) Set(n int64) {
	p.done = n
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		p.draw()
	}
}

func (p *Progress) draw() {
	line := p.desc + " " + FormatSize(p.done)
	if p.total >= 0 {
		line += " / " + FormatSize(p.total)
		if p.total > 0 {
			line += fmt.Sprintf(" (%d%%)", p.done*100/p.total)
		}
	}
	// \r to the start, \x1b[K erases the rest of the previous line.
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.drawn = true
}

// Finish clears the line. It returns nil: the signature fits the callers
// that return its error.
func (p *Progress) Finish() error {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
	return nil
}
