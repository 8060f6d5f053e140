package overlay

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// pipelineArchive is a tar of EdgeTree and a RandomTree (hard links,
// symlinks short and long, devices, fifos, xattrs, long names, sparse
// files, nanosecond times), files of sizes around a slab (pipeline.go),
// a 1 TiB PAX 1.0 sparse file, and ".wh." names (whiteouts in the layer
// modes).
func pipelineArchive(t testing.TB) []byte {
	t.Helper()
	m := testTree(t, 3, sinktest.TreeOptions{Entries: 400})
	rng := rand.New(rand.NewPCG(9, 9))
	if err := m.Mkdir(&sink.Header{Path: "slabs", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{slabSize - 1, slabSize, slabSize + 1, 3*slabSize + 7, 1, 0, 511, 4097} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		h := &sink.Header{Path: fmt.Sprintf("slabs/f%d", n), Mode: sink.TypeReg | 0o644, Size: int64(n), Mtime: time.Unix(1700000000, int64(n))}
		if err := m.WriteFile(h, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	newSparseFixture().write(t, m, "slabs/sparse", 0o600)
	for _, name := range []string{"slabs/.wh.gone", "slabs/.wh..wh..opq"} {
		if err := m.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644}, bytes.NewReader(nil)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := ExportTar(&buf, m, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// walkInto runs one walker over archive into a new ext4lite volume whose
// bytes depend only on what is written (fixed UUID and times), serially
// or pipelined, and returns the image's sha256 and the walk's error.
func walkInto(t *testing.T, archive []byte, m mode, serial bool) ([32]byte, error) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "v.ext4")
	at := time.Unix(1750000000, 0)
	v, err := ext4lite.Create(img, 128<<20, &ext4lite.CreateOptions{
		UUID: &[16]byte{1, 2, 3}, Time: at, Options: ext4lite.Options{Now: func() time.Time { return at }}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWalker(v, m, ".", newLimits(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	w.serial = serial
	w.opaqueKey = OpaqueXattr
	werr := w.run(bytes.NewReader(archive))
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b), werr
}

// TestPipelineMatchesSerial: the pipelined walk (the default on more than
// one core) makes the same volume, byte for byte, as the serial one, for
// a plain import and both layer modes, and fails the same way at every
// cut of a truncated archive, leaving the same volume.
func TestPipelineMatchesSerial(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Log("GOMAXPROCS is 1: run picks the serial walk, this test still runs both")
	}
	archive := pipelineArchive(t)
	for _, m := range []mode{modeImport, modeLayer, modeOverlayFS} {
		t.Run(fmt.Sprintf("mode%d", m), func(t *testing.T) {
			a, aerr := walkInto(t, archive, m, true)
			b, berr := walkInto(t, archive, m, false)
			if aerr != nil || berr != nil {
				t.Fatalf("serial: %v; pipelined: %v", aerr, berr)
			}
			if a != b {
				t.Fatalf("the pipelined volume differs from the serial one (sha256 %x, %x)", b, a)
			}
		})
	}
	// Cuts inside headers and inside files' data (a slab-sized one and
	// the sparse one among them).
	for _, cut := range []int{5000, 20000, len(archive) / 3, len(archive) / 2, len(archive) - 2*slabSize} {
		a, aerr := walkInto(t, archive[:cut], modeImport, true)
		b, berr := walkInto(t, archive[:cut], modeImport, false)
		if aerr == nil || berr == nil {
			t.Fatalf("cut at %d: serial %v, pipelined %v; want errors", cut, aerr, berr)
		}
		if aerr.Error() != berr.Error() || !errors.Is(berr, ErrCorrupt) {
			t.Errorf("cut at %d: serial says %q, pipelined %q (want the same, ErrCorrupt)", cut, aerr, berr)
		}
		if a != b {
			t.Errorf("cut at %d: the volumes differ", cut)
		}
	}
}

// failingSink fails the nth WriteFile.
type failingSink struct {
	sink.Sink
	n     int
	calls int
}

func (f *failingSink) WriteFile(h *sink.Header, r io.Reader) error {
	if f.calls++; f.calls == f.n {
		return fmt.Errorf("no space left (test)")
	}
	return f.Sink.WriteFile(h, r)
}

// watchedReader counts what is read and flags reads after done is set.
type watchedReader struct {
	r         io.Reader
	read      atomic.Int64
	done      atomic.Bool
	afterDone atomic.Int64
}

func (w *watchedReader) Read(p []byte) (int, error) {
	if w.done.Load() {
		w.afterDone.Add(1)
	}
	n, err := w.r.Read(p)
	w.read.Add(int64(n))
	return n, err
}

// TestPipelineStopsWithTheSink: when the sink fails, the walk returns its
// error naming the entry, the reader goroutine has stopped (no goroutine
// left), and the caller's reader is never read again.
func TestPipelineStopsWithTheSink(t *testing.T) {
	archive := pipelineArchive(t)
	before := runtime.NumGoroutine()
	for _, n := range []int{1, 5, 40} {
		dst := &failingSink{Sink: sinktest.NewMemFS(), n: n}
		r := &watchedReader{r: bytes.NewReader(archive)}
		w, err := newWalker(dst, modeImport, ".", newLimits(0, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		err = w.runPipelined(r)
		r.done.Store(true)
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Name == "" {
			t.Fatalf("write %d fails: got %v, want an *EntryError naming the entry", n, err)
		}
		if r.read.Load() == int64(len(archive)) {
			t.Errorf("write %d fails: the whole archive was read", n)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before, %d after: a reader goroutine outlived its walk", before, after)
	}
}

// blockingSink holds its first WriteFile until release is closed.
type blockingSink struct {
	sink.Sink
	started chan struct{}
	release chan struct{}
	once    bool
}

func (b *blockingSink) WriteFile(h *sink.Header, r io.Reader) error {
	if !b.once {
		b.once = true
		close(b.started)
		<-b.release
	}
	return b.Sink.WriteFile(h, r)
}

// TestPipelineReadAheadIsBounded: while the sink is stuck, the reader
// goroutine reads at most its slabs' worth of data ahead (plus headers and
// the decompressor's buffer), not the archive: memory stays bounded
// whatever the archive's size.
func TestPipelineReadAheadIsBounded(t *testing.T) {
	m := sinktest.NewMemFS()
	body := bytes.Repeat([]byte("x"), 1<<20)
	for i := range 64 {
		if err := m.WriteFile(&sink.Header{Path: fmt.Sprintf("f%02d", i), Mode: sink.TypeReg | 0o644, Size: int64(len(body))}, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := ExportTar(&buf, m, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := &blockingSink{Sink: sinktest.NewMemFS(), started: make(chan struct{}), release: make(chan struct{})}
	r := &watchedReader{r: bytes.NewReader(buf.Bytes())}
	w, err := newWalker(dst, modeImport, ".", newLimits(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.runPipelined(r) }()
	<-dst.started
	time.Sleep(200 * time.Millisecond) // let the reader run ahead as far as it can
	ahead := r.read.Load()
	close(dst.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if max := int64(slabCount*slabSize + 1<<20); ahead > max {
		t.Errorf("the reader ran %d bytes ahead of a stuck sink; want at most %d", ahead, max)
	}
	if ahead < slabSize {
		t.Errorf("the reader ran only %d bytes ahead: no read-ahead at all?", ahead)
	}
	if err := sinktest.Compare(m, dst.Sink.(*sinktest.MemFS), sinktest.CompareOptions{}); err != nil {
		t.Error(err)
	}
}
