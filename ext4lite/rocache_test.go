package ext4lite

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// TestReadOnlyCacheBounded: a read-only volume walked whole keeps at most
// readOnlyCachedInodes inodes and readOnlyCachedDirents directory entries
// decoded, and reads the same tree as with room for everything (bounds
// lowered here so that a small tree goes past them many times).
func TestReadOnlyCacheBounded(t *testing.T) {
	src := sinktest.NewMemFS()
	if err := sinktest.RandomTree(src, rand.New(rand.NewPCG(7, 7)), sinktest.TreeOptions{Entries: 400}); err != nil {
		t.Fatal(err)
	}
	sinktest.EdgeTree(src, sinktest.TreeOptions{})
	src.RemoveAll("dev/socket")
	path := filepath.Join(t.TempDir(), "v.ext4")
	if err := CreateFilled(path, 64<<20, nil, func(v *FS) error { return sink.Copy(v, src) }); err != nil {
		t.Fatal(err)
	}
	defer func(i, d int) { readOnlyCachedInodes, readOnlyCachedDirents = i, d }(readOnlyCachedInodes, readOnlyCachedDirents)
	readOnlyCachedInodes, readOnlyCachedDirents = 8, 16
	v, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.RemoveAll("lost+found"); err == nil {
		t.Fatal("RemoveAll on a read-only volume succeeded")
	}
	tree := &noLostFound{v}
	opts := sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreRoot: true}
	for round := range 2 {
		if err := sinktest.Compare(src, tree, opts); err != nil {
			t.Fatalf("round %d: %+v", round, err)
		}
		if len(v.inodes) > readOnlyCachedInodes || v.cachedDirents > readOnlyCachedDirents+64 {
			t.Fatalf("round %d: %d inodes and %d directory entries cached", round, len(v.inodes), v.cachedDirents)
		}
	}
	rep, err := v.Check(nil)
	if err != nil || len(rep.Findings) > 0 {
		t.Fatalf("check: %v %v", err, rep.Findings)
	}
}

// noLostFound is a volume as a sink.Source without mkfs's lost+found.
type noLostFound struct{ *FS }

func (s *noLostFound) ReadDir(p string) ([]string, error) {
	names, err := s.FS.ReadDir(p)
	if err != nil || (p != "" && p != "." && p != "/") {
		return names, err
	}
	out := names[:0:0]
	for _, n := range names {
		if n != "lost+found" {
			out = append(out, n)
		}
	}
	return out, nil
}
