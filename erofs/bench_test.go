package erofs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// benchTree is one fixture of BenchmarkBuild: files of one size spread over
// directories of 100.
type benchTree struct {
	name  string
	files int
	size  int
}

var benchTrees = []benchTree{
	{"10k-small-1KiB", 10000, 1 << 10},
	{"2k-mixed-37KiB", 2000, 37<<10 + 123},
	{"16-large-4MiB", 16, 4 << 20},
}

func (bt benchTree) fill(b testing.TB, s sink.Sink, data []byte) {
	mt := time.Unix(1700000000, 0)
	for i := range bt.files {
		if i%100 == 0 {
			if err := s.Mkdir(&sink.Header{Path: fmt.Sprintf("d%04d", i/100), Mode: sink.TypeDir | 0o755, Mtime: mt}); err != nil {
				b.Fatal(err)
			}
		}
		h := &sink.Header{Path: fmt.Sprintf("d%04d/file-%06d", i/100, i), Mode: sink.TypeReg | 0o644, Size: int64(bt.size), Mtime: mt.Add(time.Duration(i))}
		if i%10 == 0 {
			h.Xattrs = map[string][]byte{"user.bench": []byte("x"), "security.selinux": []byte("system_u:object_r:bin_t:s0")}
		}
		if err := s.WriteFile(h, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild measures a whole build, sink calls and WriteTo, per
// fixture and profile; bytes are file data.
func BenchmarkBuild(b *testing.B) {
	for _, bt := range benchTrees {
		data := payload(1, bt.size)
		for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
			b.Run(bt.name+"/"+prof.String(), func(b *testing.B) {
				b.SetBytes(int64(bt.files) * int64(bt.size))
				b.ReportAllocs()
				for b.Loop() {
					bl := NewBuilder(Options{Profile: prof, MemoryLimit: 1 << 30})
					bt.fill(b, bl, data)
					if _, err := bl.WriteTo(io.Discard); err != nil {
						b.Fatal(err)
					}
					bl.Close()
				}
			})
		}
	}
}

// BenchmarkRead measures opening an image and reading every file through
// the validating reader.
func BenchmarkRead(b *testing.B) {
	for _, bt := range benchTrees {
		data := payload(1, bt.size)
		bl := NewBuilder(Options{MemoryLimit: 1 << 30})
		bt.fill(b, bl, data)
		var buf bytes.Buffer
		if _, err := bl.WriteTo(&buf); err != nil {
			b.Fatal(err)
		}
		bl.Close()
		raw := buf.Bytes()
		b.Run(bt.name, func(b *testing.B) {
			b.SetBytes(int64(bt.files) * int64(bt.size))
			b.ReportAllocs()
			for b.Loop() {
				im, err := Open(bytes.NewReader(raw), int64(len(raw)))
				if err != nil {
					b.Fatal(err)
				}
				for i := range bt.files {
					r, err := im.Open(fmt.Sprintf("d%04d/file-%06d", i/100, i))
					if err != nil {
						b.Fatal(err)
					}
					if n, err := io.Copy(io.Discard, r); err != nil || n != int64(bt.size) {
						b.Fatal(n, err)
					}
				}
			}
		})
	}
}

// BenchmarkAddDir measures a host directory build as gvx-vol erofs build
// does it (AddDir, then WriteTo into a file: the parallel writer), per
// fixture and worker count; bytes are file data.
func BenchmarkAddDir(b *testing.B) {
	for _, bt := range benchTrees {
		src := b.TempDir()
		data := payload(1, bt.size)
		for i := range bt.files {
			d := filepath.Join(src, fmt.Sprintf("d%04d", i/100))
			if i%100 == 0 {
				if err := os.Mkdir(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file-%06d", i)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		out, err := os.Create(filepath.Join(b.TempDir(), "img.erofs"))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/workers-%d", bt.name, w), func(b *testing.B) {
				b.SetBytes(int64(bt.files) * int64(bt.size))
				b.ReportAllocs()
				for b.Loop() {
					bl := NewBuilder(Options{Workers: w})
					if err := bl.AddDir(src); err != nil {
						b.Fatal(err)
					}
					if _, err := out.Seek(0, io.SeekStart); err != nil {
						b.Fatal(err)
					}
					if _, err := bl.WriteTo(out); err != nil {
						b.Fatal(err)
					}
					bl.Close()
				}
			})
		}
	}
}
