package ext4lite

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TestTruncateStampsTimes: FS.Truncate and File.Truncate set the file's
// mtime and ctime as truncate(2) and ftruncate(2) do on the kernel's ext4;
// they changed only the size, so a tool that truncated a file through
// ext4lite left make, rsync and git seeing it unchanged.
func TestTruncateStampsTimes(t *testing.T) {
	now := time.Unix(1700000000, 0)
	v, err := Create(filepath.Join(t.TempDir(), "vol.ext4"), 64<<20, &CreateOptions{
		Time: now, Options: Options{Now: func() time.Time { return now }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	data := bytes.Repeat([]byte("x"), 10000)
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: int64(len(data)), Mtime: now}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile("f")
	if err != nil {
		t.Fatal(err)
	}
	for _, trunc := range []struct {
		name string
		size int64
		fn   func(int64) error
	}{
		{"FS.Truncate", 5000, func(n int64) error { return v.Truncate("f", n) }},
		{"File.Truncate", 3000, f.Truncate},
		{"File.Truncate to the same size", 3000, f.Truncate},
		{"FS.Truncate growing", 20000, func(n int64) error { return v.Truncate("f", n) }},
	} {
		now = now.Add(time.Hour)
		size := trunc.size
		if err := trunc.fn(size); err != nil {
			t.Fatalf("%s: %v", trunc.name, err)
		}
		h, err := v.Lstat("f")
		if err != nil {
			t.Fatal(err)
		}
		if h.Size != size || !h.Mtime.Equal(now) || !h.Ctime.Equal(now) {
			t.Errorf("%s: size %d mtime %v ctime %v; want %d and both %v", trunc.name, h.Size, h.Mtime, h.Ctime, size, now)
		}
	}
	if err := f.Truncate(-1); err == nil {
		t.Error("File.Truncate(-1) succeeded")
	}
}
