package ext4lite

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestCompact deletes most of a volume's data and compacts it (Compact,
// and Trim, which rungv runs at every clean close of a volume): the file's
// allocated size must drop to within a few MiB of what remains, contents
// unchanged, e2fsck clean.
func TestCompact(t *testing.T) {
	t.Run("Compact", func(t *testing.T) { testCompact(t, (*FS).Compact) })
	t.Run("Trim", func(t *testing.T) { testCompact(t, (*FS).Trim) })
}

func testCompact(t *testing.T, compact func(*FS) (*CompactStats, error)) {
	v, img := newVolume(t, 512<<20)
	rng := rand.New(rand.NewPCG(5, 5))
	data := make([][]byte, 20)
	for i := range data {
		data[i] = make([]byte, 10<<20)
		for j := range data[i] {
			data[i][j] = byte(rng.Uint32() | 1)
		}
		if err := v.WriteFile(&sink.Header{Path: fmt.Sprintf("f%02d", i), Mode: sink.TypeReg | 0o644, Size: int64(len(data[i]))}, bytes.NewReader(data[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 20; i++ {
		if err := v.Remove(fmt.Sprintf("f%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := compact(v)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact: %+v", *st)
	if st.Zeroed {
		t.Skip("this filesystem cannot punch holes")
	}
	const remaining = 20 << 20
	if st.AllocatedBefore < 200<<20 {
		t.Fatalf("before: %d bytes allocated, expected the 200 MiB written", st.AllocatedBefore)
	}
	if over := st.AllocatedAfter - remaining; over > 4<<20 {
		t.Errorf("after compaction the file takes %d bytes, %d more than the %d bytes of data left", st.AllocatedAfter, over, remaining)
	}
	// Still usable after compaction, then closed and checked.
	if err := v.WriteFile(&sink.Header{Path: "after", Mode: sink.TypeReg | 0o644, Size: 5}, bytes.NewReader([]byte("after"))); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	r, err := Open(img, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 2; i++ {
		f, err := r.Open(fmt.Sprintf("f%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		if !bytes.Equal(got, data[i]) {
			t.Fatalf("f%02d changed by compaction", i)
		}
	}
}

// noPunch is a device that cannot punch holes (a plain WriterAt).
type noPunch struct{ b []byte }

func (d *noPunch) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *noPunch) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(d.b)) {
		d.b = append(d.b, make([]byte, end-int64(len(d.b)))...)
	}
	return copy(d.b[off:], p), nil
}

// TestTrimWithoutPunch: where holes cannot be punched, Trim changes
// nothing (Compact would zero the free space) and the volume stays valid.
func TestTrimWithoutPunch(t *testing.T) {
	dev := &noPunch{}
	v, err := Format(dev, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := v.Trim()
	if err != nil || st.PunchedBytes != 0 || st.Zeroed {
		t.Fatalf("Trim: %+v, %v", st, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDevice(dev, &Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
}
