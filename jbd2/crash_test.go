package jbd2

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"testing"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

var errCrash = errors.New("simulated crash")

// crashDisk is one machine: a journal device and a home device that share a
// counter of writes and flushes. Every one after the limit fails, as if
// power went away.
// Writes since a device's last Flush sit in a volatile cache; at the crash
// each of them survives or not at random (when lossy), in any order.
type crashDisk struct {
	writes, limit int
	lossy         *rand.Rand
	commitSeqs    map[uint32]bool // sequences of commit blocks written to the device
}

func (c *crashDisk) write() error {
	c.writes++
	if c.writes > c.limit {
		return errCrash
	}
	return nil
}

type volatileWrite struct {
	n    uint64
	data []byte
}

type crashDev struct {
	c       *crashDisk
	view    *MemDevice // what reads see
	durable *MemDevice // what survives
	pending []volatileWrite
}

func (d *crashDev) ReadBlock(n uint32, p []byte) error { return d.view.ReadBlock(n, p) }

func (d *crashDev) WriteBlock(n uint32, p []byte) error {
	if err := d.c.write(); err != nil {
		return err
	}
	if h := disk.ReadHeader(p); h.Magic == disk.Magic && h.BlockType == disk.BlockCommit {
		d.c.commitSeqs[h.Sequence] = true
	}
	d.pending = append(d.pending, volatileWrite{uint64(n), bytes.Clone(p)})
	return d.view.WriteBlock(n, p)
}

func (d *crashDev) Flush() error {
	if err := d.c.write(); err != nil {
		return err
	}
	for _, w := range d.pending {
		d.durable.WriteBlock(uint32(w.n), w.data)
	}
	d.pending = d.pending[:0]
	return nil
}

// crashRunDev also takes runs of blocks, written one by one (a crash can
// cut a run anywhere).
type crashRunDev struct{ *crashDev }

func (d crashRunDev) WriteBlocks(n uint32, p []byte) error {
	for off := 0; off < len(p); off += d.view.BlockSize {
		if err := d.WriteBlock(n, p[off:off+d.view.BlockSize]); err != nil {
			return err
		}
		n++
	}
	return nil
}

// afterCrash returns the surviving device.
func (d *crashDev) afterCrash() *MemDevice {
	out := d.durable.clone()
	for _, w := range survivors(d.c, d.pending) {
		out.WriteBlock(uint32(w.n), w.data)
	}
	return out
}

func survivors(c *crashDisk, pending []volatileWrite) []volatileWrite {
	if c.lossy == nil {
		return pending
	}
	var keep []volatileWrite
	for _, w := range pending {
		if c.lossy.IntN(2) == 0 {
			keep = append(keep, w)
		}
	}
	c.lossy.Shuffle(len(keep), func(i, k int) { keep[i], keep[k] = keep[k], keep[i] })
	return keep
}

type crashHome struct {
	c       *crashDisk
	durable *memHome
	pending []volatileWrite
}

func (h *crashHome) WriteHome(b uint64, p []byte) error {
	if err := h.c.write(); err != nil {
		return err
	}
	h.pending = append(h.pending, volatileWrite{b, bytes.Clone(p)})
	return nil
}

func (h *crashHome) Flush() error {
	if err := h.c.write(); err != nil {
		return err
	}
	for _, w := range h.pending {
		h.durable.WriteHome(w.n, w.data)
	}
	h.pending = h.pending[:0]
	return nil
}

func (h *crashHome) afterCrash() *memHome {
	out := h.durable.clone()
	for _, w := range survivors(h.c, h.pending) {
		out.WriteHome(w.n, w.data)
	}
	return out
}

const (
	crashBS       = 1024
	crashFSBlocks = 200
	crashTxs      = 14
)

var crashSpecCache []*txSpec

// crashSpecs is the fixed batch of transactions every crash run replays.
func crashSpecs() []*txSpec {
	if crashSpecCache == nil {
		r := rand.New(rand.NewPCG(42, 43))
		for range crashTxs {
			crashSpecCache = append(crashSpecCache, randomTx(r, crashBS, crashFSBlocks, 150))
		}
	}
	return crashSpecCache
}

// crashScenario runs a fixed batch of transactions (checkpointing when the
// log fills, so it wraps) against a machine that dies at write number
// limit. It returns the surviving journal and home, the model states after
// 0..crashTxs committed transactions, how many Commits returned nil, and
// whether the next transaction's commit block reached the device.
func crashScenario(t *testing.T, limit int, lossy *rand.Rand) (dev *MemDevice, home *memHome, states []map[uint64][]byte, committed int, nextIssued bool, total int) {
	c := &crashDisk{limit: 1 << 30, lossy: lossy, commitSeqs: map[uint32]bool{}}
	jd := &crashDev{c: c, view: NewMemDevice(crashBS, MinBlocks), durable: NewMemDevice(crashBS, MinBlocks)}
	hd := &crashHome{c: c, durable: newMemHome(crashBS, crashFSBlocks)}
	if err := Format(jd, crashBS, MinBlocks, FormatOptions{UUID: [16]byte{9}, Features: KernelFeatures}); err != nil {
		t.Fatal(err)
	}
	var jdev BlockDevice = jd
	if lossy != nil {
		jdev = crashRunDev{jd} // the lossy runs also exercise RunWriter
	}
	j, err := Open(jdev, crashBS)
	if err != nil {
		t.Fatal(err)
	}
	c.writes, c.limit = 0, limit

	m := newModel()
	states = append(states, maps.Clone(m.expect()))
	crashed := false
	for _, spec := range crashSpecs() {
		if crashed {
			m.commit(spec)
			states = append(states, maps.Clone(m.expect()))
			continue
		}
		seq := j.Sequence()
		tx, err := j.Begin()
		if err != nil {
			t.Fatal(err)
		}
		spec.apply(t, tx)
		err = tx.Commit()
		if errors.Is(err, ErrNoSpace) {
			if err = j.Checkpoint(hd); err == nil {
				m.checkpoint()
				err = tx.Commit()
			}
		}
		if err != nil {
			if !errors.Is(err, errCrash) {
				t.Fatalf("limit %d: %v", limit, err)
			}
			crashed = true
			nextIssued = c.commitSeqs[seq]
		} else {
			committed++
		}
		m.commit(spec)
		states = append(states, maps.Clone(m.expect()))
	}
	if !crashed {
		if err := j.Checkpoint(hd); err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
	}
	return jd.afterCrash(), hd.afterCrash(), states, committed, nextIssued, c.writes
}

// TestCrashEveryWrite cuts power at every write of a batch of
// transactions and checkpoints (and, in the lossy variant, also drops a
// random subset of the writes not yet flushed, reordered). Recovery must give
// exactly the transactions whose Commit returned — plus the next one only
// if its commit block reached the disk. A crash during recovery itself is
// recovered by recovering again.
func TestCrashEveryWrite(t *testing.T) {
	_, _, _, _, _, total := crashScenario(t, 1<<30, nil)
	t.Logf("%d writes", total)
	if total < 500 {
		t.Fatalf("scenario makes only %d writes", total)
	}
	for _, lossy := range []bool{false, true} {
		step := 1
		if testing.Short() {
			step = 13
		}
		for limit := 0; limit <= total; limit += step {
			var lr *rand.Rand
			if lossy {
				lr = rand.New(rand.NewPCG(uint64(limit), 1))
			}
			dev, home, states, k, nextIssued, _ := crashScenario(t, limit, lr)

			// Every few limits, crash recovery itself once first.
			if limit%17 == 0 {
				c := &crashDisk{limit: limit % 40, commitSeqs: map[uint32]bool{}}
				jd := &crashDev{c: c, view: dev.clone(), durable: dev.clone()}
				hd := &crashHome{c: c, durable: home.clone()}
				if _, err := Recover(jd, crashBS, hd, crashFSBlocks); err != nil && !errors.Is(err, errCrash) {
					t.Fatalf("limit %d: interrupted recovery: %v", limit, err)
				}
				dev, home = jd.afterCrash(), hd.afterCrash()
			}

			if _, err := Recover(dev, crashBS, home, crashFSBlocks); err != nil {
				t.Fatalf("lossy=%v limit %d: recover: %v", lossy, limit, err)
			}
			if len(home.outside) > 0 {
				t.Fatalf("limit %d: wrote outside the filesystem: %v", limit, home.outside)
			}
			if equalState(home.blocks, states[k]) {
				continue
			}
			if nextIssued && k+1 < len(states) && equalState(home.blocks, states[k+1]) {
				continue
			}
			t.Fatalf("lossy=%v limit %d/%d: recovered state is neither %d committed transactions nor (commit issued: %v) %d",
				lossy, limit, total, k, nextIssued, k+1)
		}
	}
}

func equalState(got, want map[uint64][]byte) bool {
	for b, d := range want {
		if !bytes.Equal(got[b], d) {
			return false
		}
	}
	for b, d := range got {
		if _, ok := want[b]; !ok && d != nil {
			return false
		}
	}
	return true
}
