package ext4lite

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// bulkFill is the workload of the bulk tests: crashWorkload's operations,
// then Close.
func bulkFill(v *FS) error {
	for _, op := range crashWorkload() {
		if err := op.do(v); err != nil {
			return err
		}
		if err := v.Sync(); err != nil {
			return err
		}
	}
	return v.Close()
}

// TestBulkLoadCrashAtEveryWrite formats a volume with BulkLoad, fills it
// and closes it on a device that fails at every write in turn (keeping a
// random subset of what was not yet synced): what is left is either no
// ext4 volume at all (ErrNotExt4: no magic) or the whole volume, clean,
// with every operation's effect. A half volume that opens is a failure.
func TestBulkLoadCrashAtEveryWrite(t *testing.T) {
	const size = 16 << 20
	uuid := [16]byte{7}
	opts := &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0), JournalBlocks: 1024, BulkLoad: true}
	full := newCrashDev(make([]byte, size), 0)
	v, err := Format(full, size, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := bulkFill(v); err != nil {
		t.Fatal(err)
	}
	total := full.writes
	ops := crashWorkload()
	if err := checkRecovered(bytes.Clone(full.durable), ops, len(ops)); err != nil {
		t.Fatalf("after a clean close: %v", err)
	}
	step := 1
	if testing.Short() {
		step = max(1, total/50)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	whole, none := 0, 0
	for limit := 1; limit <= total; limit += step {
		d := newCrashDev(make([]byte, size), limit)
		if v, err := Format(d, size, opts); err == nil {
			bulkFill(v)
		}
		after := d.afterCrash(rng)
		_, err := OpenDevice(newCrashDev(after, 0), &Options{ReadOnly: true})
		if errors.Is(err, ErrNotExt4) {
			none++
			continue
		}
		if err := checkRecovered(after, ops, len(ops)); err != nil {
			t.Fatalf("crash after write %d of %d left a volume that opens but is not whole: %v", limit, total, err)
		}
		whole++
	}
	t.Logf("%d writes: %d crashes left no volume, %d the whole one", total, none, whole)
	if none == 0 || whole == 0 {
		t.Errorf("want both outcomes over the run: %d none, %d whole", none, whole)
	}
}

// TestBulkLoadSyncsOnlyAtClose: a bulk load flushes the device only in
// Close (twice: before and after the superblocks), however many flushes
// the fill makes; a journaled fill syncs at every one.
func TestBulkLoadSyncsOnlyAtClose(t *testing.T) {
	const size = 16 << 20
	for _, bulk := range []bool{false, true} {
		d := &syncCounter{crashDev: newCrashDev(make([]byte, size), 0)}
		v, err := Format(d, size, &CreateOptions{JournalBlocks: 1024, BulkLoad: bulk})
		if err != nil {
			t.Fatal(err)
		}
		d.syncs = 0
		if err := bulkFill(v); err != nil {
			t.Fatal(err)
		}
		switch {
		case bulk && d.syncs != 2:
			t.Errorf("bulk load: %d device flushes, want 2 (both in Close)", d.syncs)
		case !bulk && d.syncs < len(crashWorkload()):
			t.Errorf("journaled: %d device flushes for %d synced operations", d.syncs, len(crashWorkload()))
		}
	}
}

type syncCounter struct {
	*crashDev
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return s.crashDev.Sync() }

// TestCreateFilled: the volume appears at path only whole; a failed fill
// leaves neither path nor a temporary file; an existing path is refused
// (ErrExist) and kept unless Overwrite.
func TestCreateFilled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.ext4")
	src := sinktest.NewMemFS()
	if err := sinktest.RandomTree(src, rand.New(rand.NewPCG(5, 5)), sinktest.TreeOptions{Entries: 200}); err != nil {
		t.Fatal(err)
	}
	sinktest.EdgeTree(src, sinktest.TreeOptions{})
	src.RemoveAll("dev/socket")
	fill := func(v *FS) error { return sink.Copy(v, src) }
	if err := CreateFilled(path, 64<<20, nil, fill); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("stat %s: %v %v, want mode 0644", path, fi, err)
	}
	v, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Check(nil)
	if err != nil || len(rep.Findings) > 0 {
		t.Fatalf("check: %v %v", err, rep.Findings)
	}
	if err := v.RemoveAll("lost+found"); err != nil { // mkfs's, not the source's
		t.Fatal(err)
	}
	if err := sinktest.Compare(src, v, sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreRoot: true}); err != nil {
		t.Error(err)
	}
	v.Close()

	before, _ := os.ReadFile(path)
	if err := CreateFilled(path, 64<<20, nil, fill); !errors.Is(err, fs.ErrExist) {
		t.Errorf("over an existing file: %v, want ErrExist", err)
	}
	boom := fmt.Errorf("fill failed (test)")
	if err := CreateFilled(path, 64<<20, &CreateOptions{Overwrite: true}, func(v *FS) error {
		if err := fill(v); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("failing fill: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a failed fill changed the existing volume")
	}
	if err := CreateFilled(filepath.Join(dir, "new.ext4"), 64<<20, nil, func(*FS) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failing fill: %v", err)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Errorf("after failed fills the directory holds %v, want only v.ext4", names)
	}
}
