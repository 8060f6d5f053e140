package ext4lite_test

// Benchmarks of ext4lite's public API, one sub-benchmark per fixture, each
// on a real file in a temp directory (the page cache absorbs the writes;
// fsyncs at Close are counted where Close is timed). Compare runs with
// benchstat:
//
//	go test ./ext4lite -run '^$' -bench . -count 6 > new.txt
//	go test ./ext4lite -run '^$' -bench . -benchtime 1x   # smoke: < 1 min
//
// bench/import.sh races whole trees against mkfs.ext4 -d.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// benchUUID and benchTime make every benchmark volume deterministic.
var (
	benchUUID = [16]byte{0x67, 0x76, 0x78, 0xbe, 0x4c}
	benchTime = time.Unix(1700000000, 123456789)
)

// randomData returns n bytes of incompressible, never-all-zero data
// (ext4lite turns all-zero blocks into holes, which would skip the writes).
var randomData = sync.OnceValue(func() []byte {
	b := make([]byte, 64<<20)
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i+8 <= len(b); i += 8 {
		x := r.Uint64() | 1
		for j := 0; j < 8; j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return b
})

// createVolume makes a volume of size bytes in a fresh temp file.
func createVolume(b *testing.B, size int64, inodes uint32) (*ext4lite.FS, string) {
	b.Helper()
	p := filepath.Join(b.TempDir(), "vol.ext4")
	v, err := ext4lite.Create(p, size, &ext4lite.CreateOptions{
		UUID: &benchUUID, Time: benchTime, Inodes: inodes,
		Options: ext4lite.Options{Now: func() time.Time { return benchTime }},
	})
	if err != nil {
		b.Fatal(err)
	}
	return v, p
}

func mkdir(b *testing.B, v *ext4lite.FS, p string) {
	b.Helper()
	if err := v.Mkdir(&sink.Header{Path: p, Mode: sink.TypeDir | 0o755, Mtime: benchTime}); err != nil {
		b.Fatal(err)
	}
}

func writeFile(b *testing.B, v *ext4lite.FS, p string, data []byte) {
	b.Helper()
	h := &sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: int64(len(data)),
		Atime: benchTime, Mtime: benchTime, Ctime: benchTime}
	if err := v.WriteFile(h, bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
}

func closeVolume(b *testing.B, v *ext4lite.FS) {
	b.Helper()
	if err := v.Close(); err != nil {
		b.Fatal(err)
	}
}

var fileSizes = []struct {
	name string
	size int
}{
	{"0", 0},
	{"4KiB", 4 << 10},
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
}

// BenchmarkWriteFile times WriteFile of one file of each size (data and
// inode; directories of 1000 entries). Volumes are rotated outside the
// timer every 512 MiB or 50,000 files, and their Close (metadata flush and
// fsync) is not timed: BenchmarkCreateManyInOneDir times that.
func BenchmarkWriteFile(b *testing.B) {
	const (
		volSize    = 1 << 30
		dataBudget = 512 << 20
		fileBudget = 50000
	)
	for _, fs := range fileSizes {
		b.Run(fs.name, func(b *testing.B) {
			data := randomData()[:fs.size]
			perVol := fileBudget
			if fs.size > 0 {
				perVol = min(perVol, dataBudget/fs.size)
			}
			b.SetBytes(int64(fs.size))
			b.ReportAllocs()
			var v *ext4lite.FS
			n := 0 // files in the current volume
			for i := 0; b.Loop(); i++ {
				if v == nil || n == perVol {
					b.StopTimer()
					if v != nil {
						closeVolume(b, v)
					}
					v, _ = createVolume(b, volSize, fileBudget+1000)
					n = 0
					b.StartTimer()
				}
				if n%1000 == 0 {
					mkdir(b, v, fmt.Sprintf("d%03d", n/1000))
				}
				writeFile(b, v, fmt.Sprintf("d%03d/f%04d", n/1000, n%1000), data)
				n++
			}
			b.StopTimer()
			if v != nil {
				closeVolume(b, v)
			}
		})
	}
}

// BenchmarkCreateManyInOneDir times creating N empty files in one
// directory and closing the volume, which writes that directory as an
// htree in one go (mkfs.ext4 -d is quadratic here: bench/import.sh). The
// ns/entry metric is the cost per file.
func BenchmarkCreateManyInOneDir(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("dir/file-%08d.txt", i)
			}
			for b.Loop() {
				b.StopTimer()
				v, _ := createVolume(b, 1<<30, uint32(n)+100)
				b.StartTimer()
				mkdir(b, v, "dir")
				for _, name := range names {
					writeFile(b, v, name, nil)
				}
				closeVolume(b, v)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

// manyVolume makes a closed volume holding "dir" with 100,000 empty files
// f00000000 … and a 64 MiB file "big", in b's temp dir (call it from the
// top-level benchmark, which runs once).
func manyVolume(b *testing.B) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "many.ext4")
	v, err := ext4lite.Create(p, 1<<30, &ext4lite.CreateOptions{UUID: &benchUUID, Time: benchTime, Inodes: manyEntries + 1000})
	if err != nil {
		b.Fatal(err)
	}
	mkdir(b, v, "dir")
	for i := 0; i < manyEntries; i++ {
		writeFile(b, v, manyName(i), nil)
	}
	writeFile(b, v, "big", randomData())
	closeVolume(b, v)
	return p
}

const manyEntries = 100000

func manyName(i int) string { return fmt.Sprintf("dir/f%08d", i) }

// BenchmarkLookup times Lstat of a random name in a directory of 100,000
// entries. warm: the directory is already in memory (ext4lite reads a
// directory whole on first use). cold: each lookup opens the volume
// read-only, so it includes reading and indexing all 100,000 entries —
// what the first touch of a big directory costs.
func BenchmarkLookup(b *testing.B) {
	p := manyVolume(b)
	r := rand.New(rand.NewPCG(1, 2))
	b.Run("warm", func(b *testing.B) {
		v, err := ext4lite.Open(p, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		defer v.Close()
		if _, err := v.Lstat(manyName(0)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Lstat(manyName(r.IntN(manyEntries))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := ext4lite.Open(p, &ext4lite.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Lstat(manyName(r.IntN(manyEntries))); err != nil {
				b.Fatal(err)
			}
			v.Close()
		}
	})
}

// BenchmarkReadFile reads a whole file through Open (io.Copy to
// io.Discard) and through File.ReadAt in 1 MiB calls. The volume file is
// in the host page cache: this is ext4lite's CPU cost, not the disk's.
func BenchmarkReadFile(b *testing.B) {
	p := filepath.Join(b.TempDir(), "read.ext4")
	v, err := ext4lite.Create(p, 256<<20, &ext4lite.CreateOptions{UUID: &benchUUID, Time: benchTime})
	if err != nil {
		b.Fatal(err)
	}
	for _, fs := range fileSizes[1:] {
		writeFile(b, v, fs.name, randomData()[:fs.size])
	}
	closeVolume(b, v)
	v, err = ext4lite.Open(p, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	buf := make([]byte, 1<<20)
	for _, fs := range fileSizes[1:] {
		b.Run("Open/"+fs.name, func(b *testing.B) {
			b.SetBytes(int64(fs.size))
			b.ReportAllocs()
			for b.Loop() {
				rc, err := v.Open(fs.name)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, rc, buf)
				rc.Close()
				if err != nil || n != int64(fs.size) {
					b.Fatalf("read %d of %d bytes: %v", n, fs.size, err)
				}
			}
		})
		b.Run("ReadAt/"+fs.name, func(b *testing.B) {
			b.SetBytes(int64(fs.size))
			b.ReportAllocs()
			for b.Loop() {
				f, err := v.OpenFile(fs.name)
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < fs.size; off += len(buf) {
					if _, err := f.ReadAt(buf[:min(len(buf), fs.size-off)], int64(off)); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		})
	}
}

// BenchmarkOpen opens the populated volume (100,000 files in one
// directory, a 64 MiB file) and closes it again: read-only, and writable
// (which marks the volume in use at Open and clean at Close, with fsync).
func BenchmarkOpen(b *testing.B) {
	p := manyVolume(b)
	for _, mode := range []struct {
		name string
		ro   bool
	}{{"readonly", true}, {"readwrite", false}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := ext4lite.Open(p, &ext4lite.Options{ReadOnly: mode.ro})
				if err != nil {
					b.Fatal(err)
				}
				if err := v.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
