package fuzz

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// maxSparseApparent bounds what the harness lets an entry claim (and
// what archive/tar's apparent read of it costs).
const maxSparseApparent = 4 << 20

// sparseTarSeeds returns small sparse archives: GNU tar's four sparse
// formats (where GNU tar is installed) of a 1 MiB file with five regions
// (1 KiB of data: seeds of a few KiB keep the fuzzing engine fast; with
// 75 KiB of data it managed a few executions a second), and ExportTar's
// PAX 1.0 of the same file.
func sparseTarSeeds(t testing.TB) [][]byte {
	regs := []sink.Region{{Off: 0, Len: 100}, {Off: 8192, Len: 300}, {Off: 10000, Len: 3}, {Off: 30000, Len: 700}, {Off: 1<<16 - 1, Len: 1}}
	var data []byte
	for i, r := range regs {
		data = append(data, bytes.Repeat([]byte{byte('a' + i)}, int(r.Len))...)
	}
	m := sinktest.NewMemFS()
	sp, err := sink.NewSparse(1<<16, regs, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 1 << 16}, sp); err != nil {
		t.Fatal(err)
	}
	var own bytes.Buffer
	if err := overlay.ExportTar(&own, m, overlay.ExportOptions{SkipRoot: true}); err != nil {
		t.Fatal(err)
	}
	seeds := [][]byte{own.Bytes()}
	if out, _ := exec.Command("tar", "--version").Output(); !bytes.Contains(out, []byte("GNU tar")) {
		return seeds
	}
	dir, err := os.MkdirTemp("", "gvx-fuzz-tar-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 16)
	at := 0
	for _, r := range regs {
		f.WriteAt(data[at:at+int(r.Len)], r.Off)
		at += int(r.Len)
	}
	f.Close()
	for _, args := range [][]string{{"--format=gnu"}, {"--format=posix", "--sparse-version=0.0"}, {"--format=posix", "--sparse-version=0.1"}, {"--format=posix", "--sparse-version=1.0"}} {
		a := append([]string{"-c", "-S", "-f", "-", "-C", dir, "--owner=0", "--group=0", "--mtime=@1700000000"}, args...)
		out, err := exec.Command("tar", append(a, "f")...).Output()
		if err != nil {
			t.Fatalf("tar %v: %v", a, err)
		}
		seeds = append(seeds, out)
	}
	return seeds
}

// FuzzSparseTar: see the package doc.
func FuzzSparseTar(f *testing.F) {
	for _, s := range sparseTarSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		m := sinktest.NewMemFS()
		err := overlay.ImportTar(m, bytes.NewReader(archive), overlay.ImportOptions{MaxFileSize: maxSparseApparent})
		if err != nil {
			var ee *overlay.EntryError
			if !errors.As(err, &ee) && !errors.Is(err, overlay.ErrCorrupt) && !errors.Is(err, overlay.ErrUnsupported) {
				t.Fatalf("ImportTar: %v (%T) is no EntryError", err, err)
			}
			return
		}
		// archive/tar's view: the last regular entry of each name.
		want := map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(archive))
		for {
			h, err := tr.Next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("ImportTar took the archive, archive/tar stops: %v", err)
				}
				break
			}
			name := filepath.Clean("/" + h.Name)[1:]
			if name == "" {
				continue
			}
			if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeGNUSparse {
				delete(want, name)
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("ImportTar took the archive, archive/tar fails reading %q: %v", h.Name, err)
			}
			want[name] = b
		}
		for name, b := range want {
			h, err := m.Lstat(name)
			if err != nil || h.Type() != sink.TypeReg {
				continue // replaced by a later entry of another kind, or a hard link
			}
			r, err := m.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, b) {
				t.Fatalf("%s: overlay stored %d bytes that differ from archive/tar's %d", name, len(got), len(b))
			}
		}
	})
}
