package reflink

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/reflink/reflinktest"
)

// benchFixtures are golden files: logical size and data regions. A clone's
// cost does not depend on the size (64MiB-dense and 4GiB-1ext cost the
// same) but grows with the number of extents (4GiB-64ext); a copy costs the
// data.
var benchFixtures = []struct {
	name    string
	size    int64
	regions []region
}{
	{"64MiB-dense", 64 << 20, []region{{0, 64 << 20}}},
	{"4GiB-1ext", 4 << 30, []region{{2 << 30, 64 << 20}}},
	{"4GiB-64ext", 4 << 30, spread(64, 1<<20, 64<<20)},
}

// spread is n regions of length each, one every stride bytes.
func spread(n int, length, stride int64) []region {
	rs := make([]region, n)
	for i := range rs {
		rs[i] = region{int64(i) * stride, length}
	}
	return rs
}

// benchDir is a directory on a reflink filesystem: $GVX_BENCH_DIR (bench/
// clone.sh passes its XFS mount), else a fresh loop XFS (root only).
func benchDir(b *testing.B) string {
	if d := os.Getenv("GVX_BENCH_DIR"); d != "" {
		d, err := os.MkdirTemp(d, "bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return reflinktest.Mount(b, "xfs")
}

// BenchmarkClone measures in-process CloneFile on XFS: Always (a clone:
// FICLONE, fsync, rename, directory fsync) per golden fixture, the same
// with NoSync, and Never (the sparse copy) for contrast. SetBytes is the logical size, so MB/s
// reads as "volume bytes made available per second".
func BenchmarkClone(b *testing.B) {
	dir := benchDir(b)
	for _, fx := range benchFixtures {
		golden := filepath.Join(dir, fx.name)
		makeSparse(b, golden, fx.size, fx.regions, 0o644)
		for _, bc := range []struct {
			name string
			opts Options
		}{
			{"always", Options{Mode: Always}},
			{"always-nosync", Options{Mode: Always, NoSync: true}},
			{"never", Options{Mode: Never}},
		} {
			mode := bc.opts.Mode
			if mode == Never && fx.size > 1<<30 {
				continue // the copy is the data, already measured by the dense fixture
			}
			b.Run(fx.name+"/"+bc.name, func(b *testing.B) {
				sub, err := os.MkdirTemp(dir, "eps-")
				if err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(sub)
				b.SetBytes(fx.size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					dst := filepath.Join(sub, fmt.Sprintf("ep-%06d.ext4", i))
					if _, err := CloneFile(golden, dst, bc.opts); err != nil {
						b.Fatal(err)
					}
					if mode == Never {
						// Copies would fill the filesystem; removing is not timed.
						b.StopTimer()
						os.Remove(dst)
						b.StartTimer()
					}
				}
			})
		}
	}
}
