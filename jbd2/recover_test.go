package jbd2

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

func fill(bs int, c byte) []byte { return bytes.Repeat([]byte{c}, bs) }

// threeTx commits transactions logging block 1 as 'a', 'b', 'c' (and block
// 2+i in transaction i) and returns the device and each commit's block.
func threeTx(t *testing.T) (*MemDevice, []uint32) {
	const bs = 1024
	dev, j := newJournal(t, bs, MinBlocks, KernelFeatures)
	var commits []uint32
	for i, c := range []byte("abc") {
		tx, _ := j.Begin()
		tx.Log(1, fill(bs, c))
		tx.Log(uint64(2+i), fill(bs, c))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		commits = append(commits, j.head-1)
	}
	return dev, commits
}

func TestRecoverStopsAtTornCommit(t *testing.T) {
	dev, commits := threeTx(t)
	dev.Blocks[commits[1]][100] ^= 1 // transaction 2's commit block is torn
	home := newMemHome(1024, 10)
	st, err := Recover(dev, 1024, home, 10)
	if err != nil {
		t.Fatal(err)
	}
	if st.Transactions != 1 {
		t.Fatalf("replayed %d transactions past a torn commit", st.Transactions)
	}
	sameBlocks(t, "home", home.blocks, map[uint64][]byte{1: fill(1024, 'a'), 2: fill(1024, 'a')})
}

func TestRecoverRefusesCorruptCommittedData(t *testing.T) {
	dev, commits := threeTx(t)
	dev.Blocks[commits[1]-1][7] ^= 1 // a data block of committed transaction 2
	home := newMemHome(1024, 10)
	_, err := Recover(dev, 1024, home, 10)
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want a FormatError", err)
	}
	if len(home.blocks) != 0 {
		t.Fatal("wrote home before the scan finished")
	}
	if j, _ := Open(dev, 1024); !j.NeedsRecovery() {
		t.Fatal("a failed recovery marked the journal clean")
	}
}

// TestSequenceWraparound commits across the 2^32 transaction ID wrap.
func TestSequenceWraparound(t *testing.T) {
	const bs = 1024
	dev, _ := newJournal(t, bs, MinBlocks, KernelFeatures)
	var sb disk.Superblock
	sb.Unmarshal(dev.Blocks[0])
	sb.Sequence = 0xFFFFFFF0
	encodeSuperblock(&sb, dev.Blocks[0])
	j, err := Open(dev, bs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		tx, _ := j.Begin()
		if i == 25 {
			tx.Revoke(5) // covers the copy logged before the wrap
		} else {
			tx.Log(uint64(i%10), fill(bs, byte(i)))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if j.Sequence() > 100 {
		t.Fatalf("sequence did not wrap: %#x", j.Sequence())
	}
	home := newMemHome(bs, 10)
	st, err := Recover(dev, bs, home, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]byte{}
	for i := range 40 {
		if i != 25 {
			want[uint64(i%10)] = fill(bs, byte(i))
		}
	}
	sameBlocks(t, "home", home.blocks, want)
	if st.Transactions != 40 || st.Revoked != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestRecoverBadDescriptor follows the kernel: a descriptor that fails its
// checksum in a transaction whose commit is not older than the previous one
// is corruption; with an older commit it is a stale leftover, the log's end.
func TestRecoverBadDescriptor(t *testing.T) {
	for _, stale := range []bool{false, true} {
		const bs = 1024
		dev, j := newJournal(t, bs, MinBlocks, KernelFeatures)
		sec := int64(1000)
		j.SetClock(func() time.Time { return time.Unix(sec, 0) })
		var descs []uint32
		for i := range 3 {
			if stale && i == 1 {
				sec = 10
			}
			descs = append(descs, j.head)
			tx, _ := j.Begin()
			tx.Log(uint64(i), fill(bs, 'a'+byte(i)))
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		dev.Blocks[descs[1]][disk.HeaderSize+20] ^= 1
		home := newMemHome(bs, 10)
		st, err := Recover(dev, bs, home, 10)
		if stale {
			if err != nil || st.Transactions != 1 {
				t.Errorf("stale: %+v, %v", st, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) || len(home.blocks) != 0 {
			t.Errorf("corrupt descriptor: err %v, %d blocks written", err, len(home.blocks))
		}
	}
}
