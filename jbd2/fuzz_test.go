package jbd2

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	fuzzBS       = 1024
	fuzzFSBlocks = 64
)

// fuzzDevice lays fuzz bytes out as journal blocks 0, 1, 2, ... of a
// MinBlocks-long journal; the rest reads as zeros.
func fuzzDevice(data []byte) *MemDevice {
	dev := NewMemDevice(fuzzBS, MinBlocks)
	for n := 0; n*fuzzBS < len(data) && n < MinBlocks; n++ {
		b := make([]byte, fuzzBS)
		copy(b, data[n*fuzzBS:])
		dev.Blocks[n] = b
	}
	return dev
}

// deviceBytes is the inverse of fuzzDevice, trimmed after the last block
// written.
func deviceBytes(dev *MemDevice) []byte {
	last := 0
	for i, b := range dev.Blocks {
		if b != nil {
			last = i
		}
	}
	var out []byte
	for _, b := range dev.Blocks[:last+1] {
		if b == nil {
			b = make([]byte, fuzzBS)
		}
		out = append(out, b...)
	}
	return out
}

// seedJournals are dirty journals our writer makes: a few small
// transactions with escapes and revokes, for every feature set.
func seedJournals(t testing.TB) [][]byte {
	var seeds [][]byte
	for i, fs := range featureSets {
		dev, j := newJournal(t, fuzzBS, MinBlocks, fs.f)
		j.SetClock(func() time.Time { return time.Unix(1, 2) })
		r := rand.New(rand.NewPCG(uint64(i), 5))
		for range 3 {
			tx, _ := j.Begin()
			randomTx(r, fuzzBS, fuzzFSBlocks, 4).apply(t, tx)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		seeds = append(seeds, deviceBytes(dev))
	}
	return seeds
}

// FuzzRecover feeds arbitrary journal bytes to Recover: it must not panic,
// must never write outside the filesystem, and once it succeeds the
// journal must open clean.
func FuzzRecover(f *testing.F) {
	for _, s := range seedJournals(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64*fuzzBS {
			return
		}
		dev := fuzzDevice(data)
		home := newMemHome(fuzzBS, fuzzFSBlocks)
		_, err := Recover(dev, fuzzBS, home, fuzzFSBlocks)
		if len(home.outside) > 0 {
			t.Fatalf("wrote outside the filesystem: %v", home.outside)
		}
		if err != nil {
			return
		}
		j, err := Open(dev, fuzzBS)
		if err != nil {
			t.Fatalf("journal no longer opens after recovery: %v", err)
		}
		if j.NeedsRecovery() {
			t.Fatal("journal still dirty after recovery")
		}
	})
}

// FuzzSuperblock feeds arbitrary bytes as block 0 to Open: no panic; a
// superblock it accepts re-encodes to the same bytes, and a journal it
// opens clean takes a transaction that recovers.
func FuzzSuperblock(f *testing.F) {
	for _, fs := range featureSets {
		dev, _ := newJournal(f, fuzzBS, MinBlocks, fs.f)
		f.Add(dev.Blocks[0])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzBS {
			return
		}
		dev := fuzzDevice(data)
		j, err := Open(dev, fuzzBS)
		if err != nil {
			return
		}
		orig := bytes.Clone(dev.Blocks[0])
		buf := make([]byte, fuzzBS)
		sb := j.sb
		encodeSuperblock(&sb, buf)
		if j.sb.BlockType == 4 && !bytes.Equal(buf[:1024], orig[:1024]) && j.csum {
			t.Fatalf("accepted superblock does not re-encode to itself")
		}
		if j.NeedsRecovery() {
			Recover(dev, fuzzBS, newMemHome(fuzzBS, fuzzFSBlocks), fuzzFSBlocks)
			return
		}
		tx, err := j.Begin()
		if err != nil {
			t.Fatal(err)
		}
		tx.Log(3, bytes.Repeat([]byte{7}, fuzzBS))
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit on an accepted journal: %v", err)
		}
		home := newMemHome(fuzzBS, fuzzFSBlocks)
		if _, err := Recover(dev, fuzzBS, home, fuzzFSBlocks); err != nil {
			t.Fatalf("recovering our own commit: %v", err)
		}
		if !bytes.Equal(home.blocks[3], bytes.Repeat([]byte{7}, fuzzBS)) {
			t.Fatal("committed block not replayed")
		}
	})
}
