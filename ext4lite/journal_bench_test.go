package ext4lite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// BenchmarkMetadataWorkload creates, renames and unlinks many small files
// in a few directories, with the journal (every flush a jbd2 transaction)
// and without (metadata written home directly): the ratio is journaling's
// cost. Run: go test -run '^$' -bench MetadataWorkload -benchtime 1x ./ext4lite
func BenchmarkMetadataWorkload(b *testing.B) {
	for _, files := range benchFiles {
		for _, mode := range []struct {
			name    string
			journal int
		}{{"journal", 0}, {"nojournal", -1}} {
			b.Run(fmt.Sprintf("files=%d/%s", files, mode.name), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p := filepath.Join(b.TempDir(), "v.ext4")
					uuid := [16]byte{7}
					v, err := Create(p, 2<<30, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0), JournalBlocks: mode.journal})
					if err != nil {
						b.Fatal(err)
					}
					metadataWorkload(b, v, files)
					if err := v.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(files*3)/b.Elapsed().Seconds()*float64(b.N), "ops/s")
			})
		}
	}
}

func metadataWorkload(b *testing.B, v *FS, files int) {
	for d := 0; d < 10; d++ {
		if err := v.Mkdir(&sink.Header{Path: fmt.Sprintf("d%d", d), Mode: sink.TypeDir | 0o755}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < files; i++ {
		if err := v.WriteFile(&sink.Header{Path: fmt.Sprintf("d%d/f%d", i%10, i), Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("x")); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < files; i++ {
		if err := v.Rename(fmt.Sprintf("d%d/f%d", i%10, i), fmt.Sprintf("d%d/g%d", (i+1)%10, i)); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < files; i += 2 {
		if err := v.Remove(fmt.Sprintf("d%d/g%d", (i+1)%10, i)); err != nil {
			b.Fatal(err)
		}
	}
}

var benchFiles = []int{10_000, 100_000}
