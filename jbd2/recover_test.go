package jbd2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
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
	if !strings.Contains(st.Aborted, "commit block checksum fails") {
		t.Errorf("Aborted = %q, want it to name the commit checksum", st.Aborted)
	}
	sameBlocks(t, "home", home.blocks, map[uint64][]byte{1: fill(1024, 'a'), 2: fill(1024, 'a')})
}

// TestRecoverCutsAtCorruptTransaction: a committed transaction with a bad
// checksum anywhere (a logged block, its descriptor, its revoke block, its
// commit block) ends the log there: the transactions before it are
// replayed, Stats.Aborted says which and why, and the journal is clean
// afterwards; the volume stays usable. Before, all but the commit case
// refused the whole journal (and so the volume), where e2fsck recovers.
func TestRecoverCutsAtCorruptTransaction(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		corrupt    func(dev *MemDevice, j *Journal, seq2 uint32)
	}{
		{"logged block", "checksum of logged block 1 fails", func(dev *MemDevice, j *Journal, seq uint32) {
			dev.Blocks[j.pending[1].blocks[0].jblock][7] ^= 1
		}},
		{"descriptor", "descriptor block checksum fails", func(dev *MemDevice, j *Journal, seq uint32) {
			dev.Blocks[j.pending[1].blocks[0].jblock-1][disk.HeaderSize+20] ^= 1
		}},
		{"revoke", "revoke block checksum fails", func(dev *MemDevice, j *Journal, seq uint32) {
			for b := range dev.Blocks {
				if h := disk.ReadHeader(dev.Blocks[b]); h.Magic == disk.Magic && h.Sequence == seq && h.BlockType == disk.BlockRevoke {
					dev.Blocks[b][disk.RevokeHdrSize+3] ^= 1
					return
				}
			}
			panic("no revoke block")
		}},
		{"commit", "commit block checksum fails", func(dev *MemDevice, j *Journal, seq uint32) {
			dev.Blocks[j.pending[1].blocks[len(j.pending[1].blocks)-1].jblock+1][100] ^= 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bs = 1024
			dev, j := newJournal(t, bs, MinBlocks, KernelFeatures)
			for i, c := range []byte("abc") {
				tx, _ := j.Begin()
				tx.Log(1, fill(bs, c))
				tx.Log(uint64(2+i), fill(bs, c))
				tx.Revoke(9)
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			seq2 := j.pending[1].seq
			tc.corrupt(dev, j, seq2)
			home := newMemHome(bs, 10)
			st, err := Recover(dev, bs, home, 10)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if st.Transactions != 1 || st.EndSeq != seq2 {
				t.Errorf("stats %+v: want 1 transaction replayed, the log ended at %d", st, seq2)
			}
			if want := fmt.Sprintf("transaction %d: %s", seq2, tc.want); !strings.Contains(st.Aborted, want) {
				t.Errorf("Aborted = %q, want %q", st.Aborted, want)
			}
			sameBlocks(t, "home", home.blocks, map[uint64][]byte{1: fill(bs, 'a'), 2: fill(bs, 'a')})
			if j, err := Open(dev, bs); err != nil || j.NeedsRecovery() {
				t.Errorf("after recovery: %v, needs recovery %v", err, err == nil && j.NeedsRecovery())
			}
		})
	}
}

// TestRecoverRevokedBadBlock: a logged block whose checksum fails does not
// end the log when a revoke in a later transaction covers it: it is never
// written home, and the kernel and debugfs's jr replay the transaction
// (they test the revoke before the checksum). FuzzReplay found the
// difference. When ending the log at another bad block drops the revoke
// that covered it, it ends the log at its own transaction instead.
func TestRecoverRevokedBadBlock(t *testing.T) {
	const bs = 1024
	type txn struct {
		log    []uint64
		revoke []uint64
	}
	for _, tc := range []struct {
		name    string
		txs     []txn
		bad     [][2]int // (transaction, logged block index) to corrupt
		wantTx  int
		want    map[uint64][]byte
		aborted string
	}{
		{"revoked later", []txn{{log: []uint64{1, 2}}, {log: []uint64{3, 4}}, {revoke: []uint64{4}}},
			[][2]int{{1, 1}}, 3, map[uint64][]byte{1: fill(bs, 'a'), 2: fill(bs, 'a'), 3: fill(bs, 'b')}, ""},
		{"not revoked", []txn{{log: []uint64{1}}, {log: []uint64{3, 4}}, {revoke: []uint64{3}}},
			[][2]int{{1, 1}}, 1, map[uint64][]byte{1: fill(bs, 'a')}, "checksum of logged block 4 fails"},
		// Transaction 2's block 4 is covered only by transaction 4's revoke;
		// transaction 3's bad block 5 ends the log there, which drops that
		// revoke, so the log ends at 2 after all.
		{"revoke cut off", []txn{{log: []uint64{1}}, {log: []uint64{3, 4}}, {log: []uint64{5}}, {revoke: []uint64{4}}},
			[][2]int{{1, 1}, {2, 0}}, 1, map[uint64][]byte{1: fill(bs, 'a')}, "checksum of logged block 4 fails"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, j := newJournal(t, bs, MinBlocks, KernelFeatures)
			for i, x := range tc.txs {
				tx, _ := j.Begin()
				for _, b := range x.log {
					tx.Log(b, fill(bs, 'a'+byte(i)))
				}
				for _, b := range x.revoke {
					tx.Revoke(b)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			seqs := make([]uint32, len(j.pending))
			for i, p := range j.pending {
				seqs[i] = p.seq
			}
			for _, b := range tc.bad {
				dev.Blocks[j.pending[b[0]].blocks[b[1]].jblock][7] ^= 1
			}
			home := newMemHome(bs, 10)
			st, err := Recover(dev, bs, home, 10)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if st.Transactions != tc.wantTx || !strings.Contains(st.Aborted, tc.aborted) || (tc.aborted == "") != (st.Aborted == "") {
				t.Errorf("stats %+v: want %d transactions, Aborted naming %q", st, tc.wantTx, tc.aborted)
			}
			if wantEnd := seqs[0] + uint32(tc.wantTx); st.EndSeq != wantEnd {
				t.Errorf("EndSeq %d, want %d", st.EndSeq, wantEnd)
			}
			sameBlocks(t, "home", home.blocks, tc.want)
			revokes := 0
			for _, x := range tc.txs[:tc.wantTx] {
				revokes += len(x.revoke)
			}
			if st.RevokeRecords != revokes {
				t.Errorf("RevokeRecords %d, want %d (the replayed transactions' revokes, each once)", st.RevokeRecords, revokes)
			}
		})
	}
}

// TestRecoverRefusesBlockPastEnd: a committed, checksummed transaction
// logging a block past the filesystem's end is corruption: nothing is
// written home.
func TestRecoverRefusesBlockPastEnd(t *testing.T) {
	const bs = 1024
	dev, j := newJournal(t, bs, MinBlocks, KernelFeatures)
	for _, b := range []uint64{1, 50} {
		tx, _ := j.Begin()
		tx.Log(b, fill(bs, 'x'))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	home := newMemHome(bs, 10)
	_, err := Recover(dev, bs, home, 10)
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "logs block 50") {
		t.Fatalf("got %v, want a FormatError naming block 50", err)
	}
	if len(home.blocks) != 0 {
		t.Fatal("wrote home before the scan finished")
	}
	if j, _ := Open(dev, bs); !j.NeedsRecovery() {
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

// TestRecoverBadDescriptor: a descriptor that fails its checksum in a
// transaction whose commit is not older than the previous one cuts the log
// there (TestRecoverCutsAtCorruptTransaction); with an older commit it is
// a stale leftover, the log's end, and nothing is reported.
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
		if err != nil || st.Transactions != 1 || len(home.blocks) != 1 {
			t.Errorf("stale %v: %+v, %v, %d blocks written", stale, st, err, len(home.blocks))
		}
		if got := st.Aborted != ""; got == stale {
			t.Errorf("stale %v: Aborted = %q", stale, st.Aborted)
		}
	}
}
