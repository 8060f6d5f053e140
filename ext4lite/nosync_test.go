package ext4lite

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestNoSyncKilledProcess: with Options.NoSync a Sync flushes nothing to
// stable storage, yet a process killed after it (every completed write
// kept, as the host's page cache keeps them) leaves a volume that
// recovers to everything synced, passes Check, and whose Close flushes.
func TestNoSyncKilledProcess(t *testing.T) {
	img := make([]byte, 64<<20)
	d := newCrashDev(img, 0)
	fs0, err := Format(d, int64(len(img)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs0.Close(); err != nil {
		t.Fatal(err)
	}
	flushes := func() int { return len(d.pending) } // writes not flushed yet
	cd := &syncCountDev{crashDev: d}
	v, err := OpenDevice(cd, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	data := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%d;", i)), 2048) }
	for i := 0; i < 20; i++ {
		if err := v.WriteFile(&sink.Header{Path: fmt.Sprintf("f%02d", i), Mode: sink.TypeReg | 0o644, Size: 4096}, bytes.NewReader(data(i)[:4096])); err != nil {
			t.Fatal(err)
		}
		if err := v.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if cd.syncs != 0 || flushes() == 0 {
		t.Fatalf("NoSync: the syncs flushed the device %d times", cd.syncs)
	}
	// Killed: the durable image never changed, but every completed write
	// is in cur (the page cache). Open a copy of cur as the next episode
	// would, after the kill.
	killed := newCrashDev(bytes.Clone(d.cur), 0)
	w, err := OpenDevice(killed, nil)
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	for i := 0; i < 20; i++ {
		f, err := w.Open(fmt.Sprintf("f%02d", i))
		if err != nil {
			t.Fatalf("f%02d, synced before the kill: %v", i, err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if !bytes.Equal(got, data(i)[:4096]) {
			t.Fatalf("f%02d: %d bytes, not what was synced", i, len(got))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Check(killed, nil)
	if err != nil || !r.Clean() {
		t.Fatalf("Check after the kill: %v %v", r, err)
	}
	// Close flushes even with NoSync: a volume closed gracefully is durable.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if cd.syncs == 0 || flushes() != 0 {
		t.Fatalf("NoSync: Close flushed %d times and left %d writes unflushed", cd.syncs, flushes())
	}
}

// syncCountDev counts its device flushes.
type syncCountDev struct {
	*crashDev
	syncs int
}

func (d *syncCountDev) Sync() error {
	d.syncs++
	return d.crashDev.Sync()
}
