package reflink

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSparseCopy compares the two sparse copies — copyData (the system's
// hole map: SEEK_DATA/SEEK_HOLE on Linux and macOS) and copySkipZeros (the
// portable one) — on random layouts of data and holes: both must
// reproduce the source byte for byte, and neither may copy more than the
// file.
func FuzzSparseCopy(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 3, 7, 0, 0, 2})
	f.Add([]byte{255, 255, 0, 0, 1, 1, 128, 0, 9, 4})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, layout []byte) {
		// Each 2-byte pair: a gap in 4 KiB blocks (up to 63) and a data run
		// in bytes (up to 16 KiB); at most 16 runs keep one exec fast.
		var regions []region
		var off int64
		for i := 0; i+1 < len(layout) && len(regions) < 16; i += 2 {
			off += int64(layout[i]&63) * 4096
			n := int64(binary.LittleEndian.Uint16([]byte{layout[i+1], layout[i] >> 6}))%(16<<10) + 1
			regions = append(regions, region{off, n})
			off += n
		}
		size := off
		if len(layout)%2 == 1 {
			size += int64(layout[len(layout)-1]) * 4096 // a trailing hole
		}
		src := filepath.Join(dir, "src")
		os.Remove(src)
		want := writeSparse(t, src, size, regions, 0o600, false)
		sf, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		for name, cp := range map[string]func(dst *os.File) (int64, error){
			"copyData":      func(d *os.File) (int64, error) { return copyData(d, sf, size, true) },
			"copySkipZeros": func(d *os.File) (int64, error) { d.Truncate(size); return copySkipZeros(d, sf, size) },
		} {
			dst := filepath.Join(dir, name)
			os.Remove(dst)
			df, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			n, err := cp(df)
			df.Close()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if n < 0 || n > size {
				t.Fatalf("%s: copied %d bytes of a %d-byte file", name, n, size)
			}
			got, _ := os.ReadFile(dst)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: copy differs from the source (%d regions, size %d)", name, len(regions), size)
			}
		}
	})
}
