package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// sparseFixture is a file of 1 TiB apparent size holding 1 MiB of data in
// 9 regions (more than an old GNU header's 4, so extension blocks too),
// the last ending at the last byte.
type sparseFixture struct {
	size int64
	regs []sink.Region
	data [][]byte
}

func newSparseFixture() *sparseFixture {
	f := &sparseFixture{size: 1 << 40}
	r := rand.New(rand.NewPCG(7, 7))
	offs := []int64{0, 1 << 20, 5<<20 + 17, 1 << 30, 3 << 30, 1 << 35, 1 << 38, 1<<39 + 4096, f.size - 200<<10}
	left := int64(1 << 20)
	for i, off := range offs {
		n := left / int64(len(offs)-i)
		if i == len(offs)-1 {
			n = f.size - off
		}
		left -= n
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.IntN(255) + 1)
		}
		f.regs = append(f.regs, sink.Region{Off: off, Len: n})
		f.data = append(f.data, b)
	}
	return f
}

// write writes the fixture's file into s at p.
func (f *sparseFixture) write(t testing.TB, s sink.Sink, p string, perm uint32) {
	t.Helper()
	var all []byte
	for _, d := range f.data {
		all = append(all, d...)
	}
	sp, err := sink.NewSparse(f.size, f.regs, bytes.NewReader(all))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(&sink.Header{Path: p, Mode: sink.TypeReg | perm, Size: f.size}, sp); err != nil {
		t.Fatal(err)
	}
}

func (f *sparseFixture) dataSize() int64 {
	var n int64
	for _, r := range f.regs {
		n += r.Len
	}
	return n
}

// verify reads back p from src at every region and in the holes around.
func (f *sparseFixture) verify(t *testing.T, src sink.Source, p string) {
	t.Helper()
	h, err := src.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if h.Size != f.size {
		t.Fatalf("%s: size %d, want %d", p, h.Size, f.size)
	}
	r, err := src.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ra, ok := r.(io.ReaderAt)
	if !ok {
		t.Fatalf("%s: the source's reader is no io.ReaderAt", p)
	}
	for i, rg := range f.regs {
		got := make([]byte, rg.Len)
		if _, err := ra.ReadAt(got, rg.Off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.data[i]) {
			t.Errorf("%s: region %d at %d differs", p, i, rg.Off)
		}
		if rg.Off > 4096 {
			z := make([]byte, 4096)
			if _, err := ra.ReadAt(z, rg.Off-4096); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(z, make([]byte, 4096)) {
				t.Errorf("%s: the hole before region %d holds data", p, i)
			}
		}
	}
}

// sparseCounter wraps a sink and checks that every file arrives as a
// *sink.Sparse and that the sink below reads no more than its data.
type sparseCounter struct {
	sink.Sink
	t    *testing.T
	read int64
}

func (c *sparseCounter) WriteFile(h *sink.Header, r io.Reader) error {
	sp, ok := r.(*sink.Sparse)
	if !ok {
		// Not passed on: the sink would read every hole byte.
		return fmt.Errorf("%s: arrived as %T, not as *sink.Sparse", h.Path, r)
	}
	var data bytes.Buffer
	if err := sp.WriteRegions(func(_ int64, r io.Reader, _ int64) error {
		_, err := io.Copy(&data, r)
		return err
	}); err != nil {
		return err
	}
	cr := &countingReader{r: &data}
	again, err := sink.NewSparse(sp.Size(), sp.Regions(), cr)
	if err != nil {
		return err
	}
	err = c.Sink.WriteFile(h, again)
	c.read += cr.n
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// sparseSinks are the targets every sparse import is checked against.
func sparseSinks(t *testing.T) map[string]func() (sink.Sink, sink.Source) {
	return map[string]func() (sink.Sink, sink.Source){
		"ext4lite": func() (sink.Sink, sink.Source) {
			v, err := ext4lite.Create(filepath.Join(t.TempDir(), "v.ext4"), 64<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { v.Close() })
			return v, v
		},
		"erofs": func() (sink.Sink, sink.Source) {
			b := erofs.NewBuilder(erofs.Options{TempDir: t.TempDir()})
			t.Cleanup(func() { b.Close() })
			return b, b
		},
		"hostdir": func() (sink.Sink, sink.Source) {
			d := hostdir.New(t.TempDir())
			return d, d
		},
		"memfs": func() (sink.Sink, sink.Source) {
			m := sinktest.NewMemFS()
			return m, m
		},
	}
}

// importSparse imports archive into each sparse sink and checks the file,
// the bytes each sink read, and returns the sinks' sources.
func importSparse(t *testing.T, archive []byte, name string, f *sparseFixture) map[string]sink.Source {
	out := map[string]sink.Source{}
	for sname, mk := range sparseSinks(t) {
		dst, src := mk()
		c := &sparseCounter{Sink: dst, t: t}
		if err := ImportTar(c, bytes.NewReader(archive), ImportOptions{}); err != nil {
			t.Fatalf("%s: %v", sname, err)
		}
		if max := 2 * f.dataSize(); c.read > max {
			t.Errorf("%s read %d bytes of a sparse file with %d bytes of data (%d apparent); want at most %d", sname, c.read, f.dataSize(), f.size, max)
		}
		f.verify(t, src, name)
		out[sname] = src
	}
	return out
}

// TestImportSparsePAX10 imports ExportTar's own sparse entries (GNU's PAX
// 1.0) of a 1 TiB file with 1 MiB of data: every sink reads the data only,
// never the holes. Before, the importer read the file's apparent bytes
// from archive/tar, zeros and all: O(apparent size).
func TestImportSparsePAX10(t *testing.T) {
	f := newSparseFixture()
	m := sinktest.NewMemFS()
	f.write(t, m, "big", 0o644)
	var archive bytes.Buffer
	if err := ExportTar(&archive, m, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := int64(archive.Len()); n > f.dataSize()+64<<10 {
		t.Fatalf("the archive is %d bytes for %d of data", n, f.dataSize())
	}
	importSparse(t, archive.Bytes(), "big", f)
}

// TestImportSparseMapMismatch: a sparse map that covers more or fewer
// bytes than the entry stores, or is out of order, is ErrCorrupt, and
// nothing is read past the entry.
func TestImportSparseMapMismatch(t *testing.T) {
	mk := func(m string) []byte {
		h := ustarHeader("f", 0o644, 0, 0, int64(512+5), 0, '0')
		px := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
			paxRecord("GNU.sparse.name", "f") + paxRecord("GNU.sparse.realsize", "100")
		xh := ustarHeader("PaxHeaders.0/f", 0o644, 0, 0, int64(len(px)), 0, 'x')
		var b bytes.Buffer
		b.Write(xh)
		b.WriteString(px)
		b.Write(make([]byte, pad(int64(len(px)))))
		b.Write(h)
		b.WriteString(m)
		b.Write(make([]byte, pad(int64(len(m)))))
		b.WriteString("hello")
		b.Write(make([]byte, pad(5)+1024))
		return b.Bytes()
	}
	good := mk("2\n0\n2\n50\n3\n")
	m := sinktest.NewMemFS()
	if err := ImportTar(m, bytes.NewReader(good), ImportOptions{}); err != nil {
		t.Fatalf("the well-formed archive: %v", err)
	}
	want := make([]byte, 100)
	copy(want, "he")
	copy(want[50:], "llo")
	if got := readSource(t, m, "f"); !bytes.Equal(got, want) {
		t.Errorf("f = %q, want %q", got, want)
	}
	for _, bad := range []string{"2\n0\n2\n50\n4\n", "1\n0\n2\n", "2\n50\n3\n0\n2\n", "2\n0\n2\n99\n3\n"} {
		err := ImportTar(sinktest.NewMemFS(), bytes.NewReader(mk(bad)), ImportOptions{})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("map %q: %v, want ErrCorrupt", bad, err)
		}
	}
}

func readSource(t *testing.T, src sink.Source, p string) []byte {
	t.Helper()
	r, err := src.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
