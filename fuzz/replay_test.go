package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/jbd2"
)

// FuzzReplay: see the package doc. The input's first byte picks a
// journaled seed, then FuzzExt4's mutation records follow (tag records
// matter most here).
func FuzzReplay(f *testing.F) {
	_, seeds := ext4Seeds(f)
	if len(seeds) == 0 {
		f.Skip("no journaled seeds: needs mkfs.ext4 and debugfs")
	}
	for i := range seeds {
		b := byte(i)
		f.Add([]byte{b})
		f.Add([]byte{b, opTag, 0, 2})
		f.Add([]byte{b, opTag, 1, 7})
		f.Add([]byte{b, opTag, 0x22, 0})
		f.Add([]byte{b, opTag, 0x82, 5})
	}
	debugfs := have("debugfs")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		img := mutateExt4(seeds[int(in[0])%len(seeds)].img, in[1:])
		ours, err := replayOurs(img)
		if err != nil {
			if !errors.Is(err, jbd2.ErrCorrupt) && !errors.Is(err, jbd2.ErrUnsupported) && !errors.Is(err, errNoJournal) {
				t.Fatalf("Recover: error wraps no sentinel: %v", err)
			}
			return
		}
		if !debugfs {
			return
		}
		theirs, ok := replayDebugfs(t, dir, img)
		if !ok {
			return // debugfs refused or complained: nothing to compare
		}
		if diff := diffOutsideJournal(img, ours, theirs); diff != "" {
			t.Fatalf("jbd2.Recover and debugfs -R jr replay differently: %s", diff)
		}
	})
}

var errNoJournal = errors.New("fuzz: no journal to map")

// journalDev is the journal inside an image in memory.
type journalDev struct {
	img    []byte
	bs     int
	blocks []uint64
}

func (d *journalDev) at(n uint32) (int, error) {
	if int(n) >= len(d.blocks) || d.blocks[n] >= uint64(len(d.img)/d.bs) {
		return 0, fmt.Errorf("journal block %d outside the journal or image", n)
	}
	return int(d.blocks[n]) * d.bs, nil
}

func (d *journalDev) ReadBlock(n uint32, p []byte) error {
	o, err := d.at(n)
	if err == nil {
		copy(p, d.img[o:o+d.bs])
	}
	return err
}

func (d *journalDev) WriteBlock(n uint32, p []byte) error {
	o, err := d.at(n)
	if err == nil {
		copy(d.img[o:o+d.bs], p)
	}
	return err
}

func (d *journalDev) WriteHome(b uint64, p []byte) error {
	if b >= uint64(len(d.img)/d.bs) {
		return fmt.Errorf("home block %d past the image", b)
	}
	copy(d.img[int(b)*d.bs:], p)
	return nil
}

// replayOurs replays img's journal with jbd2.Recover (what ext4lite's open
// does) into a copy.
func replayOurs(img []byte) ([]byte, error) {
	out := bytes.Clone(img)
	im, err := ext4test.Parse(out)
	if err != nil {
		return nil, errNoJournal
	}
	jb := im.JournalBlocks()
	if len(jb) == 0 {
		return nil, errNoJournal
	}
	d := &journalDev{img: out, bs: im.BlockSize(), blocks: jb}
	if _, err := jbd2.Recover(d, d.bs, d, im.BlocksCount()); err != nil {
		return nil, err
	}
	return out, nil
}

// replayDebugfs replays img with debugfs -w -R jr; ok is false when
// debugfs said anything beyond its banner (an error, a warning).
func replayDebugfs(t *testing.T, dir string, img []byte) ([]byte, bool) {
	p := filepath.Join(dir, "replay.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("debugfs", "-w", "-R", "jr", p).CombinedOutput()
	if err != nil {
		return nil, false
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, "debugfs ") {
			return nil, false
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

// diffOutsideJournal compares two replays block by block, leaving out the
// superblock's block and the journal's own blocks (each tool records the
// end of recovery there in its own way). It names the first few blocks
// that differ and what the original held.
func diffOutsideJournal(orig, a, b []byte) string {
	im, err := ext4test.Parse(bytes.Clone(orig))
	if err != nil || len(a) != len(b) {
		return fmt.Sprintf("images of %d and %d bytes", len(a), len(b))
	}
	bs := im.BlockSize()
	skip := map[uint64]bool{uint64(1024 / bs): true}
	for _, j := range im.JournalBlocks() {
		skip[j] = true
	}
	var diffs []string
	for n := 0; n*bs < len(a); n++ {
		if skip[uint64(n)] {
			continue
		}
		x, y := a[n*bs:(n+1)*bs], b[n*bs:(n+1)*bs]
		if !bytes.Equal(x, y) {
			was := "unchanged by jbd2"
			if !bytes.Equal(x, orig[n*bs:(n+1)*bs]) {
				was = "written by jbd2"
			}
			diffs = append(diffs, fmt.Sprintf("block %d (%s)", n, was))
			if len(diffs) == 5 {
				break
			}
		}
	}
	return strings.Join(diffs, ", ")
}
