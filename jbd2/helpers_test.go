package jbd2

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// memHome is an in-memory filesystem of n blocks; writes past its end are
// recorded as errors (and fail the write).
type memHome struct {
	bs      int
	n       uint64
	blocks  map[uint64][]byte
	flushes int
	outside []uint64
}

func newMemHome(bs int, n uint64) *memHome {
	return &memHome{bs: bs, n: n, blocks: make(map[uint64][]byte)}
}

func (h *memHome) WriteHome(b uint64, p []byte) error {
	if b >= h.n || len(p) != h.bs {
		h.outside = append(h.outside, b)
		return fmt.Errorf("write of block %d outside filesystem of %d", b, h.n)
	}
	h.blocks[b] = bytes.Clone(p)
	return nil
}

func (h *memHome) Flush() error { h.flushes++; return nil }

func (h *memHome) clone() *memHome {
	c := *h
	c.blocks = make(map[uint64][]byte, len(h.blocks))
	for k, v := range h.blocks {
		c.blocks[k] = v
	}
	return &c
}

// model tracks what home must hold: base (checkpointed) plus the overlay of
// committed transactions (nil = revoked, home keeps base).
type model struct {
	base    map[uint64][]byte
	overlay map[uint64][]byte
}

func newModel() *model {
	return &model{base: map[uint64][]byte{}, overlay: map[uint64][]byte{}}
}

func (m *model) commit(t *txSpec) {
	for _, op := range t.ops {
		if op.data == nil {
			m.overlay[op.block] = nil
		} else {
			m.overlay[op.block] = op.data
		}
	}
}

func (m *model) checkpoint() {
	for b, d := range m.overlay {
		if d != nil {
			m.base[b] = d
		}
	}
	m.overlay = map[uint64][]byte{}
}

func (m *model) expect() map[uint64][]byte {
	e := make(map[uint64][]byte, len(m.base))
	for b, d := range m.base {
		e[b] = d
	}
	for b, d := range m.overlay {
		if d != nil {
			e[b] = d
		}
	}
	return e
}

func sameBlocks(t testing.TB, what string, got, want map[uint64][]byte) bool {
	t.Helper()
	keys := map[uint64]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]uint64, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	ok := true
	for _, k := range sorted {
		if !bytes.Equal(got[k], want[k]) {
			t.Errorf("%s: block %d differs (got %d bytes, want %d)", what, k, len(got[k]), len(want[k]))
			ok = false
		}
	}
	return ok
}

type txOp struct {
	block uint64
	data  []byte // nil: revoke
}

type txSpec struct{ ops []txOp }

// randomTx makes a transaction of up to maxOps operations on blocks below
// nblocks; some blocks start with the journal magic (they must be escaped),
// some are revoked, some logged twice.
func randomTx(r *rand.Rand, bs int, nblocks uint64, maxOps int) *txSpec {
	t := &txSpec{}
	n := 1 + r.IntN(maxOps)
	for range n {
		b := r.Uint64N(nblocks)
		if r.IntN(8) == 0 {
			t.ops = append(t.ops, txOp{block: b})
			continue
		}
		d := make([]byte, bs)
		for i := range d {
			d[i] = byte(r.Uint32())
		}
		if r.IntN(5) == 0 {
			putBE32(d, magic)
		}
		t.ops = append(t.ops, txOp{block: b, data: d})
	}
	return t
}

func (s *txSpec) apply(t testing.TB, tx *Tx) {
	t.Helper()
	for _, op := range s.ops {
		var err error
		if op.data == nil {
			err = tx.Revoke(op.block)
		} else {
			err = tx.Log(op.block, op.data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// featureSets are the journal configurations tests run over.
var featureSets = []struct {
	name string
	f    Features
}{
	{"plain32", Features{}},
	{"64bit", Features{Incompat: Incompat64Bit}},
	{"csum2-32", Features{Incompat: IncompatCsumV2}},
	{"csum2-64", Features{Incompat: IncompatCsumV2 | Incompat64Bit}},
	{"csum3-32", Features{Incompat: IncompatCsumV3}},
	{"csum3-64", KernelFeatures},
}

func newJournal(t testing.TB, bs int, n uint32, f Features) (*MemDevice, *Journal) {
	t.Helper()
	dev := NewMemDevice(bs, n)
	if err := Format(dev, bs, n, FormatOptions{UUID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Features: f}); err != nil {
		t.Fatal(err)
	}
	j, err := Open(dev, bs)
	if err != nil {
		t.Fatal(err)
	}
	return dev, j
}

func (d *MemDevice) clone() *MemDevice {
	c := &MemDevice{BlockSize: d.BlockSize, Blocks: make([][]byte, len(d.Blocks))}
	for i, b := range d.Blocks {
		if b != nil {
			c.Blocks[i] = bytes.Clone(b)
		}
	}
	return c
}

// runDev adds RunWriter to a MemDevice, so tests cover both write paths.
type runDev struct {
	*MemDevice
	runs int
}

func (d *runDev) WriteBlocks(n uint32, p []byte) error {
	d.runs++
	for off := 0; off < len(p); off += d.BlockSize {
		if err := d.WriteBlock(n, p[off:off+d.BlockSize]); err != nil {
			return err
		}
		n++
	}
	return nil
}
