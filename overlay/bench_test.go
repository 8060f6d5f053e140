package overlay

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// benchFixtures are archives of trees shaped like image layers: many small
// files ("small": 3000 entries up to 16 KiB) and fewer big ones ("large":
// 300 entries up to 1 MiB).
func benchFixtures(b testing.TB) map[string][]byte {
	b.Helper()
	fx := map[string][]byte{}
	for name, o := range map[string]sinktest.TreeOptions{
		"small": {Entries: 3000, MaxFileSize: 16 << 10, Unprivileged: os.Geteuid() != 0, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
		"large": {Entries: 300, MaxFileSize: 1 << 20, Unprivileged: os.Geteuid() != 0, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
	} {
		m := sinktest.NewMemFS()
		if err := sinktest.RandomTree(m, rand.New(rand.NewPCG(1, 1)), o); err != nil {
			b.Fatal(err)
		}
		removeType(b, m, ".", sink.TypeSocket)
		var buf bytes.Buffer
		if err := ExportTar(&buf, m, ExportOptions{}); err != nil {
			b.Fatal(err)
		}
		fx[name] = buf.Bytes()
	}
	return fx
}

func BenchmarkImportTar(b *testing.B) {
	for _, name := range []string{"small", "large"} {
		data := benchFixtures(b)[name]
		b.Run(name+"/memfs", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := ImportTar(sinktest.NewMemFS(), bytes.NewReader(data), ImportOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/ext4lite", func(b *testing.B) {
			// A new volume filled as gvx-vol create --from fills it
			// (bulk load), Close (the metadata's flush) included.
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				v, err := ext4lite.Create(filepath.Join(b.TempDir(), "v.ext4"), int64(len(data))*2+64<<20, &ext4lite.CreateOptions{BulkLoad: true})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := ImportTar(v, bytes.NewReader(data), ImportOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := v.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/hostdir", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				b.StartTimer()
				if err := ImportTar(hostdir.New(dir), bytes.NewReader(data), ImportOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkExportTar(b *testing.B) {
	for _, name := range []string{"small", "large"} {
		data := benchFixtures(b)[name]
		m := sinktest.NewMemFS()
		if err := ImportTar(m, bytes.NewReader(data), ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/memfs", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				if err := ExportTar(&out, m, ExportOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkApplyLayer(b *testing.B) {
	data := benchFixtures(b)["small"]
	b.Run("small/onto-itself/memfs", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			m := sinktest.NewMemFS()
			if err := ApplyLayer(m, bytes.NewReader(data), LayerOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := ApplyLayer(m, bytes.NewReader(data), LayerOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
