package ext4lite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// newVolume creates a volume in a temp dir with a fixed UUID and time.
func newVolume(t testing.TB, size int64) (*FS, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vol.ext4")
	uuid := [16]byte{0x67, 0x76, 0x78, 1}
	v, err := Create(p, size, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, p
}

// TestConformance runs the shared sink contract against ext4lite, and
// after each subtest the volume is closed, reopened and compared again, so
// what was read back came from disk, not from caches.
func TestConformance(t *testing.T) {
	sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
		v, _ := newVolume(t, 64<<20)
		if err := v.Mkdir(&sink.Header{Path: "t", Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
		tr, err := v.Sub("t")
		if err != nil {
			t.Fatal(err)
		}
		return tr, tr
	})
}

func TestReopenEqualsMemFS(t *testing.T) {
	v, p := newVolume(t, 128<<20)
	mem := sinktest.NewMemFS()
	for _, s := range []sink.Sink{v, mem} {
		if err := sinktest.RandomTree(s, rand.New(rand.NewPCG(1, 1)), sinktest.TreeOptions{Entries: 500}); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.RemoveAll("lost+found"); err != nil { // compare the trees alone
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opts := sinktest.ConformanceCompare
	opts.IgnoreRoot = true
	if err := sinktest.Compare(mem, r, opts); err != nil {
		t.Fatal(err)
	}
}

// TestOpenTruncated: a volume whose file ends before its last block is
// refused for writing (ErrCorrupt, as the kernel refuses to mount it) and
// opens read-only with Info saying Truncated, not Clean. Before, both
// opens succeeded and Info called it clean.
func TestOpenTruncated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.ext4")
	v, err := Create(p, 32<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 20<<20); err != nil {
		t.Fatal(err)
	}
	if v, err := Open(p, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(fmt.Sprint(err), "truncated") {
		if err == nil {
			v.Close()
		}
		t.Fatalf("read-write open of a truncated volume: %v, want ErrCorrupt saying truncated", err)
	}
	r, err := Open(p, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		t.Fatal(err)
	}
	if !info.Truncated || info.Clean {
		t.Errorf("Info: truncated %v, clean %v", info.Truncated, info.Clean)
	}
}
