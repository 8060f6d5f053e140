package ext4lite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestVolumeLock: a volume open for writing keeps other writers out (Open,
// Create with Overwrite, LockFile) with ErrInUse and leaves its bytes
// alone; readers still open it; after Close a writer gets in.
func TestVolumeLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.ext4")
	v, err := Create(p, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 2}, strings.NewReader("hi")); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, nil); !errors.Is(err, ErrInUse) {
		t.Fatalf("second writer: %v, want ErrInUse", err)
	}
	if _, err := Create(p, 64<<20, &CreateOptions{Overwrite: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("overwrite of a volume in use: %v, want ErrInUse", err)
	}
	r, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reader: %v", err)
	}
	if h, err := r.Lstat("f"); err != nil || h.Size != 2 {
		t.Fatalf("reader sees f: %+v, %v (the refused overwrite must not truncate)", h, err)
	}
	r.Close()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := LockFile(f, false); !errors.Is(err, ErrInUse) {
		t.Fatalf("shared lock beside a writer: %v, want ErrInUse", err)
	}
	f.Close()
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p, nil)
	if err != nil {
		t.Fatalf("writer after Close: %v", err)
	}
	w.Close()
}
