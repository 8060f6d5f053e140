package ext4lite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// crashDev is a device that crashes: after limit writes every write and
// sync fails. What survives is what was synced plus a random subset of the
// writes issued since the last sync (the disk may have reordered them), so
// the test checks write ordering and flushes, not just a cut-off prefix.
type crashDev struct {
	durable []byte   // contents as of the last successful Sync
	cur     []byte   // contents as the running filesystem sees them
	pending []pwrite // writes since the last Sync
	writes  int
	limit   int // 0: never crash
	crashed bool
}

type pwrite struct {
	off int64
	p   []byte
}

var errCrashed = errors.New("crashDev: crashed")

func newCrashDev(img []byte, limit int) *crashDev {
	return &crashDev{durable: bytes.Clone(img), cur: bytes.Clone(img), limit: limit}
}

func (d *crashDev) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(d.cur)) {
		return 0, io.EOF
	}
	n := copy(p, d.cur[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *crashDev) WriteAt(p []byte, off int64) (int, error) {
	if d.crashed || d.limit > 0 && d.writes >= d.limit {
		d.crashed = true
		return 0, errCrashed
	}
	d.writes++
	if int(off)+len(p) > len(d.cur) {
		return 0, fmt.Errorf("crashDev: write past the end")
	}
	copy(d.cur[off:], p)
	d.pending = append(d.pending, pwrite{off, bytes.Clone(p)})
	return len(p), nil
}

func (d *crashDev) Sync() error {
	if d.crashed || d.limit > 0 && d.writes >= d.limit {
		d.crashed = true
		return errCrashed
	}
	for _, w := range d.pending {
		copy(d.durable[w.off:], w.p)
	}
	d.pending = d.pending[:0]
	return nil
}

// afterCrash is the image a power cut leaves: durable plus a random
// subset of the unsynced writes, applied in a random order.
func (d *crashDev) afterCrash(rng *rand.Rand) []byte {
	img := bytes.Clone(d.durable)
	for _, i := range rng.Perm(len(d.pending)) {
		if rng.IntN(2) == 0 {
			w := d.pending[i]
			copy(img[w.off:], w.p)
		}
	}
	return img
}

// crashOp is one step of the workload; each is followed by Sync.
type crashOp struct {
	name string
	do   func(v *FS) error
	// check verifies the op's effect on a recovered volume; done says
	// whether the op's Sync returned (its effect must be there).
	check func(v *FS, done bool) error
}

func crashWorkload() []crashOp {
	content := func(i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("file %d;", i)), 300*i+1)
	}
	var ops []crashOp
	ops = append(ops, crashOp{"mkdir d", func(v *FS) error {
		return v.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755})
	}, func(v *FS, done bool) error {
		_, err := v.Lstat("d")
		if done && err != nil {
			return err
		}
		return nil
	}})
	for i := 0; i < 6; i++ {
		i := i
		name := fmt.Sprintf("d/f%d", i)
		data := content(i)
		ops = append(ops, crashOp{"write " + name, func(v *FS) error {
			return v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(data)),
				Xattrs: map[string][]byte{"user.i": []byte(name)}}, bytes.NewReader(data))
		}, func(v *FS, done bool) error {
			r, err := v.Open(name)
			if err != nil && i == 1 {
				r, err = v.Open("d/g1") // renamed by a later op
			}
			if err != nil {
				if done && i != 2 { // d/f2 is removed by a later op
					return err
				}
				return nil // not committed (or removed later): absent is right
			}
			got, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, data) {
				return fmt.Errorf("%s: %d bytes, want %d (torn file)", name, len(got), len(data))
			}
			return nil
		}})
	}
	ops = append(ops, crashOp{"rename d/f1 d/g1", func(v *FS) error { return v.Rename("d/f1", "d/g1") },
		func(v *FS, done bool) error {
			_, e1 := v.Lstat("d/f1")
			_, e2 := v.Lstat("d/g1")
			if (e1 == nil) == (e2 == nil) {
				return fmt.Errorf("rename is half done: f1 %v, g1 %v", e1, e2)
			}
			if done && e2 != nil {
				return e2
			}
			return nil
		}})
	ops = append(ops, crashOp{"remove d/f2", func(v *FS) error { return v.Remove("d/f2") },
		func(v *FS, done bool) error {
			if _, err := v.Lstat("d/f2"); done && err == nil {
				return fmt.Errorf("d/f2 still there")
			}
			return nil
		}})
	ops = append(ops, crashOp{"many", func(v *FS) error {
		for i := 0; i < 150; i++ {
			if err := v.WriteFile(&sink.Header{Path: fmt.Sprintf("d/m%03d", i), Mode: sink.TypeReg | 0o600, Size: 2}, strings.NewReader("ok")); err != nil {
				return err
			}
		}
		return nil
	}, func(v *FS, done bool) error {
		names, err := v.ReadDir("d")
		if err != nil {
			return err
		}
		n := 0
		for _, x := range names {
			if strings.HasPrefix(x, "m") {
				n++
			}
		}
		if n != 0 && n != 150 || done && n != 150 {
			return fmt.Errorf("%d of 150 entries of one transaction", n)
		}
		return nil
	}})
	return ops
}

// runWorkload runs ops with a Sync after each and reports how many were
// synced before the device failed.
func runWorkload(v *FS, ops []crashOp) (synced int) {
	for i, op := range ops {
		if err := op.do(v); err != nil {
			return i
		}
		if err := v.Sync(); err != nil {
			return i
		}
	}
	return len(ops)
}

func formatImage(t testing.TB, size int64) []byte {
	d := newCrashDev(make([]byte, size), 0)
	uuid := [16]byte{9}
	v, err := Format(d, size, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0), JournalBlocks: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return d.durable
}

// TestCrashAtEveryWrite cuts the workload's writes at every point (and,
// past the first cut, drops a random subset of the unsynced ones), then
// recovers: the volume must be consistent, every synced operation there
// and the one in flight all or nothing.
func TestCrashAtEveryWrite(t *testing.T) {
	const size = 16 << 20
	img := formatImage(t, size)
	ops := crashWorkload()
	// Count the writes of a full run.
	full := newCrashDev(img, 0)
	v, err := OpenDevice(full, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := runWorkload(v, ops); n != len(ops) {
		t.Fatalf("workload failed without a crash at op %d", n)
	}
	total := full.writes
	step := 1
	if testing.Short() {
		step = max(1, total/50)
	}
	t.Logf("workload: %d ops, %d writes", len(ops), total)
	rng := rand.New(rand.NewPCG(1, 2))
	for limit := 1; limit <= total; limit += step {
		d := newCrashDev(img, limit)
		v, err := OpenDevice(d, nil)
		var synced int
		if err == nil {
			synced = runWorkload(v, ops)
		}
		after := d.afterCrash(rng)
		if err := checkRecovered(after, ops, synced); err != nil {
			t.Fatalf("crash after write %d of %d (%d ops synced): %v", limit, total, synced, err)
		}
		if limit%max(1, total/8) == 0 {
			e2fsckAfterRecovery(t, after)
		}
	}
}

// checkRecovered opens (replaying the journal), checks and closes.
func checkRecovered(img []byte, ops []crashOp, synced int) error {
	d := newCrashDev(img, 0)
	v, err := OpenDevice(d, nil)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	rep, err := v.Check(nil)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if len(rep.Findings) > 0 {
		return fmt.Errorf("check after recovery: %v", rep.Findings)
	}
	for i, op := range ops {
		if i > synced {
			break // never started
		}
		if err := op.check(v, i < synced); err != nil {
			return fmt.Errorf("op %q (synced=%v): %w", op.name, i < synced, err)
		}
	}
	if err := v.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	copy(img, d.durable)
	return nil
}
