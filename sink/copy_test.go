package sink_test

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// failingSink refuses every regular file.
type failingSink struct{ sink.Sink }

var errRefused = errors.New("refused")

func (f failingSink) WriteFile(h *sink.Header, r io.Reader) error { return errRefused }

// TestCopyReportsWriteFileErrors is the regression test for a shadowed
// error that made Copy report success when a file could not be written.
func TestCopyReportsWriteFileErrors(t *testing.T) {
	src := sinktest.NewMemFS()
	if err := src.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: 2}, strings.NewReader("hi")); err != nil {
		t.Fatal(err)
	}
	err := sink.Copy(failingSink{sinktest.NewMemFS()}, src)
	if !errors.Is(err, errRefused) {
		t.Fatalf("Copy = %v, want the sink's error", err)
	}
}

func TestCopyMemFS(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		src, dst := sinktest.NewMemFS(), sinktest.NewMemFS()
		if err := sinktest.RandomTree(src, rand.New(rand.NewPCG(seed, 0)), sinktest.TreeOptions{Entries: 400}); err != nil {
			t.Fatal(err)
		}
		if err := sink.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		if err := sinktest.Compare(src, dst, sinktest.CompareOptions{}); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}

// TestCopyThroughHostDir copies MemFS → host directory → MemFS: the host
// kernel keeps directory mtimes only if Copy applies them after children.
func TestCopyThroughHostDir(t *testing.T) {
	src := sinktest.NewMemFS()
	if err := sinktest.EdgeTree(src, sinktest.TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sinktest.RandomTree(src, rand.New(rand.NewPCG(9, 9)), sinktest.TreeOptions{Entries: 200}); err != nil {
		t.Fatal(err)
	}
	d := hostdir.New(t.TempDir())
	if err := sink.Copy(d, src); err != nil {
		if testingPrivilegeError(err) {
			t.Skipf("needs root for devices and owners: %v", err)
		}
		t.Fatal(err)
	}
	back := sinktest.NewMemFS()
	if err := sink.Copy(back, d); err != nil {
		t.Fatal(err)
	}
	opts := sinktest.CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true}
	if err := sinktest.Compare(src, back, opts); err != nil {
		t.Error(err)
	}
}

func testingPrivilegeError(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, sink.ErrUnsupported)
}

// TestCopyLinkedDirs copies trees holding hard links to directories, as a
// crafted volume or image can: a cycle (a/up is the root) and nested
// shared subtrees (2^40 paths). Copy used to follow every name: the cycle
// never ended and the shared subtrees would have taken 2^40 copies. Each
// directory is now entered once and the second name stops the copy with a
// *sink.DirLinkError naming both paths and the inode.
func TestCopyLinkedDirs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		src         *sinktest.Linked
		path, first string
		ino         uint64
	}{
		{"cycle", sinktest.LinkedCycle(), "a/up", ".", 1},
		// Depth first: the deepest directory is met twice first.
		{"dag", sinktest.LinkedDAG(40), strings.Repeat("x/", 39) + "y", strings.Repeat("x/", 39) + "x", 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sink.Copy(sinktest.NewMemFS(), tc.src)
			var de *sink.DirLinkError
			if !errors.As(err, &de) || !errors.Is(err, sink.ErrDirLinked) {
				t.Fatalf("Copy = %v, want a *sink.DirLinkError", err)
			}
			if de.Path != tc.path || de.First != tc.first || de.Ino != tc.ino {
				t.Errorf("DirLinkError = %+v, want %s again at %s, inode %d", *de, tc.first, tc.path, tc.ino)
			}
			t.Log(err)
		})
	}
}
