package jbd2

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCommitRecover commits random transactions (escaped blocks, revokes,
// relogs), checkpointing when the log fills so it wraps, then "crashes"
// and recovers a copy of the device; home must match the model every time.
func TestCommitRecover(t *testing.T) {
	for i, fs := range featureSets {
		t.Run(fs.name, func(t *testing.T) {
			const bs, n, fsBlocks = 1024, 1024, 300
			dev, j := newJournal(t, bs, n, fs.f)
			var rd *runDev
			if i%2 == 1 { // every other feature set writes through RunWriter
				rd = &runDev{MemDevice: dev}
				j.dev = rd
			}
			j.SetClock(func() time.Time { return time.Unix(1700000000, 5) })
			home := newMemHome(bs, fsBlocks)
			m := newModel()
			r := rand.New(rand.NewPCG(7, uint64(len(fs.name))))
			wrapped := false
			for i := range 60 {
				spec := randomTx(r, bs, fsBlocks, 120)
				tx, err := j.Begin()
				if err != nil {
					t.Fatal(err)
				}
				spec.apply(t, tx)
				if err := tx.Commit(); errors.Is(err, ErrNoSpace) {
					if err := j.Checkpoint(home); err != nil {
						t.Fatal(err)
					}
					m.checkpoint()
					sameBlocks(t, "after checkpoint", home.blocks, m.base)
					err = tx.Commit()
					if err != nil {
						t.Fatal(err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if j.head < j.sb.Start && j.used > 0 {
					wrapped = true
				}
				m.commit(spec)

				// Crash now: recover a copy of the device into a copy of home.
				if i%7 == 0 || i == 59 {
					cdev, chome := dev.clone(), home.clone()
					st, err := Recover(cdev, bs, chome, fsBlocks)
					if err != nil {
						t.Fatalf("tx %d: recover: %v", i, err)
					}
					if st.Transactions == 0 {
						t.Fatalf("tx %d: recovery found no transaction", i)
					}
					if !sameBlocks(t, "after recovery", chome.blocks, m.expect()) {
						t.Fatalf("tx %d: stats %+v", i, st)
					}
					// The journal is clean now, and a second recovery is a no-op.
					j2, err := Open(cdev, bs)
					if err != nil || j2.NeedsRecovery() {
						t.Fatalf("after recovery: open %v, needs recovery %v", err, j2.NeedsRecovery())
					}
				}
			}
			if !wrapped {
				t.Error("the log never wrapped around")
			}
			if rd != nil && rd.runs == 0 {
				t.Error("RunWriter never used")
			}
		})
	}
}

func TestRevokeSemantics(t *testing.T) {
	const bs = 1024
	blk := func(c byte) []byte {
		p := make([]byte, bs)
		for i := range p {
			p[i] = c
		}
		return p
	}
	dev, j := newJournal(t, bs, 1024, KernelFeatures)
	commit := func(f func(tx *Tx)) {
		tx, err := j.Begin()
		if err != nil {
			t.Fatal(err)
		}
		f(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	commit(func(tx *Tx) { tx.Log(1, blk('a')); tx.Log(2, blk('a')); tx.Log(3, blk('a')); tx.Log(4, blk('a')) })
	commit(func(tx *Tx) { tx.Revoke(1); tx.Log(2, blk('b')); tx.Revoke(2) }) // 1, 2: revoked
	commit(func(tx *Tx) { tx.Revoke(3); tx.Log(3, blk('c')) })               // relog cancels the revoke
	commit(func(tx *Tx) { tx.Log(4, blk('x')); tx.Log(4, blk('d')) })        // later log replaces
	home := newMemHome(bs, 10)
	home.blocks[1] = blk('0')
	home.blocks[2] = blk('0')
	st, err := Recover(dev.clone(), bs, home, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]byte{1: blk('0'), 2: blk('0'), 3: blk('c'), 4: blk('d')}
	sameBlocks(t, "recovery", home.blocks, want)
	if st.Transactions != 4 || st.Revoked != 2 {
		t.Errorf("stats %+v", st)
	}
	// Checkpoint agrees with recovery.
	home2 := newMemHome(bs, 10)
	home2.blocks[1] = blk('0')
	home2.blocks[2] = blk('0')
	if err := j.Checkpoint(home2); err != nil {
		t.Fatal(err)
	}
	sameBlocks(t, "checkpoint", home2.blocks, want)
	j2, err := Open(dev, bs)
	if err != nil || j2.NeedsRecovery() {
		t.Fatalf("after checkpoint: %v %v", err, j2.NeedsRecovery())
	}
}

func TestNoSpace(t *testing.T) {
	const bs = 1024
	_, j := newJournal(t, bs, 1024, KernelFeatures)
	tx, _ := j.Begin()
	for b := range uint64(1100) {
		tx.Log(b, make([]byte, bs))
	}
	if err := tx.Commit(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("commit of %d blocks into 1023: %v", tx.Blocks(), err)
	}
	if err := tx.Log(1, make([]byte, 5)); err == nil {
		t.Error("Log accepted a short block")
	}
	tx2, _ := j.Begin()
	if err := tx2.Log(1<<32, make([]byte, bs)); err != nil {
		t.Errorf("64bit journal refused block 2^32: %v", err)
	}
	_, j32 := newJournal(t, bs, 1024, Features{})
	tx3, _ := j32.Begin()
	if err := tx3.Log(1<<32, make([]byte, bs)); err == nil {
		t.Error("32-bit journal accepted block 2^32")
	}
}

func TestSetFeatures(t *testing.T) {
	const bs = 4096
	dev, j := newJournal(t, bs, 1024, Features{})
	if err := j.SetFeatures(KernelFeatures); err != nil {
		t.Fatal(err)
	}
	j2, err := Open(dev, bs)
	if err != nil {
		t.Fatal(err)
	}
	if j2.Features() != KernelFeatures {
		t.Fatalf("features %+v", j2.Features())
	}
	if err := j2.SetFeatures(Features{Incompat: IncompatFastCommit}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("fast commit: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	const bs = 1024
	mk := func(f func(p []byte), fixCsum bool) *MemDevice {
		dev, _ := newJournal(t, bs, 1024, KernelFeatures)
		f(dev.Blocks[0])
		if fixCsum {
			putBE32(dev.Blocks[0][0xFC:], 0)
			sb := dev.Blocks[0]
			putBE32(sb[0xFC:], superblockChecksum(sb))
		}
		return dev
	}
	for _, c := range []struct {
		name string
		f    func(p []byte)
		fix  bool
		want error
	}{
		{"magic", func(p []byte) { p[0] = 0 }, true, ErrCorrupt},
		{"blocktype", func(p []byte) { p[7] = 2 }, true, ErrCorrupt},
		{"blocksize", func(p []byte) { putBE32(p[0x0C:], 4096) }, true, ErrCorrupt},
		{"maxlen", func(p []byte) { putBE32(p[0x10:], 10) }, true, ErrCorrupt},
		{"first", func(p []byte) { putBE32(p[0x14:], 0) }, true, ErrCorrupt},
		{"start", func(p []byte) { putBE32(p[0x1C:], 5000) }, true, ErrCorrupt},
		{"checksum", func(p []byte) { p[0x18]++ }, false, ErrCorrupt},
		{"incompat", func(p []byte) { p[0x2B] |= 0x40 }, true, ErrUnsupported},
		{"fastcommit", func(p []byte) { p[0x2B] |= 0x20 }, true, ErrUnsupported},
		{"csumtype", func(p []byte) { p[0x50] = 1 }, true, ErrUnsupported},
	} {
		_, err := Open(mk(c.f, c.fix), bs)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Open(NewMemDevice(bs, 1024), 2048); err == nil {
		t.Error("Open accepted a block size mismatch")
	}
}

func TestNeedsRecoveryRefusesWrites(t *testing.T) {
	dev, j := newJournal(t, 1024, 1024, KernelFeatures)
	tx, _ := j.Begin()
	tx.Log(3, make([]byte, 1024))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	j2, err := Open(dev, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if !j2.NeedsRecovery() {
		t.Fatal("dirty journal not reported")
	}
	if _, err := j2.Begin(); !errors.Is(err, ErrNeedsRecovery) {
		t.Fatalf("Begin on a dirty journal: %v", err)
	}
	if _, err := j2.Recover(newMemHome(1024, 2), 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("recovery with block 3 past a 2-block filesystem: %v", err)
	}
}
