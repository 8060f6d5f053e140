package image

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image/imagetest"
)

type benchFixture struct {
	name   string
	layers func(b *testing.B) [][]byte
}

var benchFixtures = []benchFixture{
	{"small-files", func(b *testing.B) [][]byte {
		// 3 layers of 2,000 files of 1–8 KiB in 100 directories; the upper
		// layers delete and replace some of the lower ones.
		rng := rand.New(rand.NewPCG(1, 2))
		var layers [][]byte
		for l := 0; l < 3; l++ {
			var es []imagetest.Entry
			for d := 0; d < 100; d++ {
				dir := fmt.Sprintf("usr/lib/pkg%03d", d)
				if l == 0 {
					es = append(es, imagetest.Dir("usr", 0o755), imagetest.Dir("usr/lib", 0o755), imagetest.Dir(dir, 0o755))
				}
				if l > 0 && d%10 == 0 {
					es = append(es, imagetest.Opaque(dir))
				}
				for f := 0; f < 20; f++ {
					body := strings.Repeat(string(rune('a'+rng.IntN(26))), 1024+rng.IntN(7*1024))
					es = append(es, imagetest.File(fmt.Sprintf("%s/l%d-f%02d", dir, l, f), body))
				}
				if l > 0 {
					es = append(es, imagetest.Whiteout(dir, fmt.Sprintf("l%d-f00", l-1)))
				}
			}
			tb, err := imagetest.Tar(es...)
			if err != nil {
				b.Fatal(err)
			}
			layers = append(layers, tb)
		}
		return layers
	}},
	{"big-file", func(b *testing.B) [][]byte {
		buf := make([]byte, 64<<20)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		tb, err := imagetest.Tar(imagetest.File("blob", string(buf)))
		if err != nil {
			b.Fatal(err)
		}
		return [][]byte{tb}
	}},
}

func benchLayout(b *testing.B, f benchFixture) (string, int64) {
	b.Helper()
	layers := f.layers(b)
	var n int64
	for _, l := range layers {
		n += int64(len(l))
	}
	img, err := imagetest.Image(amd64, fixtureConfig, layers...)
	if err != nil {
		b.Fatal(err)
	}
	lay := b.TempDir()
	if err := imagetest.WriteLayout(lay, img, ""); err != nil {
		b.Fatal(err)
	}
	return "oci:" + lay, n
}

// BenchmarkAdd flattens an OCI layout (gzip layers) into a fresh cache:
// decompression, diffID hashing, layer application and EROFS writing. Bytes
// are uncompressed layer bytes.
func BenchmarkAdd(b *testing.B) {
	for _, f := range benchFixtures {
		b.Run(f.name, func(b *testing.B) {
			src, n := benchLayout(b, f)
			b.SetBytes(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c, err := cache.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := Add(ctx, c, src, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAddCached is the cost of adding an image that is already in the
// cache: resolving the source and finding the entry, no layer is read.
func BenchmarkAddCached(b *testing.B) {
	src, _ := benchLayout(b, benchFixtures[0])
	c, err := cache.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Add(ctx, c, src, Options{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, err := Add(ctx, c, src, Options{}); err != nil || r.Created {
			b.Fatal(r, err)
		}
	}
}
