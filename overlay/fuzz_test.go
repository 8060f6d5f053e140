package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"z.gfire.dev/gvx/sink/sinktest"
)

// Fuzzing limits: what a fuzzed archive may make MemFS hold.
const (
	fuzzMaxFile  = 1 << 20
	fuzzMaxBytes = 8 << 20
)

// fuzzSeeds are small on purpose: the fuzzer minimizes every new
// interesting input, and minimizing a 40 KiB archive stalls a 10 s run.
func fuzzSeeds(f *testing.F) {
	mt := time.Unix(1600000000, 123456789)
	pax := tarOf(f,
		entry{h: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o1755, ModTime: mt, AccessTime: mt, Format: tar.FormatPAX}},
		entry{h: tar.Header{Name: "d/f", Mode: 0o4755, Uid: 70000, ModTime: mt, ChangeTime: mt, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.user.a": "v", "LIBARCHIVE.xattr.user.b": "eA=="}}, body: "data"},
		entry{h: tar.Header{Name: "c", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}},
		entry{h: tar.Header{Name: "p", Typeflag: tar.TypeFifo}},
		hardlink("d/g", "d/f"),
	)
	f.Add(pax)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pax)
	zw.Close()
	f.Add(gz.Bytes())
	zw2, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	f.Add(zw2.EncodeAll(pax, nil))
	f.Add(tarOf(f, dir("a"), file("a/x", "x"), hardlink("a/y", "a/x"), symlink("l", "/etc"), file("l/x", "evil")))
	f.Add(tarOf(f, dir("o"), wh("o/.wh..wh..opq"), file("o/n", "n"), wh(".wh.a"), wh("o/.wh.n")))
	f.Add(tarOf(f, file("../../x", "x")))
}

// FuzzImportTar: any bytes give an import or an error, never a panic or a
// runaway allocation; a successful import exports and re-imports to the
// same tree.
func FuzzImportTar(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m := sinktest.NewMemFS()
		m.MaxBytes = fuzzMaxBytes
		if err := ImportTar(m, bytes.NewReader(data), ImportOptions{MaxFileSize: fuzzMaxFile}); err != nil {
			var ee *EntryError
			if !errors.As(err, &ee) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error of unexpected form: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := ExportTar(&out, m, ExportOptions{}); err != nil {
			if errors.Is(err, ErrUnsupported) {
				return // e.g. a socket, which tar cannot hold
			}
			t.Fatalf("export of an imported tree: %v", err)
		}
		back := sinktest.NewMemFS()
		if err := ImportTar(back, &out, ImportOptions{}); err != nil {
			t.Fatalf("re-import of our own export: %v", err)
		}
		if err := sinktest.Compare(m, back, sinktest.CompareOptions{}); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzApplyLayer applies fuzzed layers onto a small base tree, flattened
// and in overlay form.
func FuzzApplyLayer(f *testing.F) {
	fuzzSeeds(f)
	base := tarOf(f, dir("a"), file("a/x", "x"), dir("o"), file("o/y", "y"), symlink("l", "/etc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := sinktest.NewMemFS()
		m.MaxBytes = fuzzMaxBytes
		if err := ApplyLayer(m, bytes.NewReader(base), LayerOptions{}); err != nil {
			t.Fatal(err)
		}
		ApplyLayer(m, bytes.NewReader(data), LayerOptions{MaxFileSize: fuzzMaxFile})
		o := sinktest.NewMemFS()
		o.MaxBytes = fuzzMaxBytes
		WriteLayerOverlayFS(o, bytes.NewReader(data), LayerOptions{MaxFileSize: fuzzMaxFile})
		// Whatever happened, the trees stay walkable.
		if err := sinktest.Compare(m, m, sinktest.CompareOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
