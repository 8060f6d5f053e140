package ext4lite

import (
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// TestDeepTreeWalkLinear: walking a tree 3,000 directories deep through
// the path API the way an export does (Lstat and ReadDir of each directory,
// then Lstat of each child) allocates a bounded amount per entry, whatever
// the depth. Before, every lookup split the whole path and walked it from
// the root: D² steps and allocations (a 10k-deep tree took 11 s to export).
func TestDeepTreeWalkLinear(t *testing.T) {
	const depth = 3000
	v, _ := newVolume(t, 64<<20)
	dir := RootIno
	var err error
	for range depth {
		if dir, err = v.CreateAt(dir, "a", &sink.Header{Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	paths := make([]string, depth)
	p := "a"
	for i := range paths {
		paths[i] = p
		p += "/a"
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, p := range paths {
		if _, err := v.Lstat(p); err != nil {
			t.Fatal(err)
		}
		if _, err := v.ReadDir(p); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perEntry := (after.TotalAlloc - before.TotalAlloc) / depth
	if perEntry > 2048 {
		t.Errorf("walking a %d-deep tree allocated %d bytes per entry; want a bound independent of the depth (a path of %d components split per lookup is %d bytes)", depth, perEntry, depth, 16*depth)
	}
	t.Logf("%d bytes allocated per entry at depth %d", perEntry, depth)
}

// TestPathCacheForgets: the last-directory cache never resolves a path to
// what used to be there: after a rename, an unlink or an exchange, paths
// below the old name fail or find the new entry.
func TestPathCacheForgets(t *testing.T) {
	v, _ := newVolume(t, 32<<20)
	mk := func(p string) {
		t.Helper()
		if err := v.Mkdir(&sink.Header{Path: p, Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	mk("x")
	mk("x/y")
	mk("z")
	if err := v.WriteFile(&sink.Header{Path: "x/y/f", Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lstat("x/y/f"); err != nil { // caches x/y
		t.Fatal(err)
	}
	if err := v.Rename("x", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lstat("x/y/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after rename x → w, Lstat(x/y/f) = %v; want ErrNotExist", err)
	}
	if _, err := v.Lstat("w/y/f"); err != nil {
		t.Fatal(err)
	}
	if err := v.RemoveAll("w"); err != nil {
		t.Fatal(err)
	}
	mk("w")
	if _, err := v.Lstat("w/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after RemoveAll and Mkdir w, Lstat(w/y) = %v; want ErrNotExist", err)
	}
	mk("w/y")
	if _, err := v.Lstat("w/y"); err != nil { // caches w/y
		t.Fatal(err)
	}
	root := RootIno
	if err := v.RenameAt(root, "w", root, "z", RenameExchange); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lstat("w/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after exchanging w and z, Lstat(w/y) = %v; want ErrNotExist", err)
	}
	if _, err := v.Lstat("z/y"); err != nil {
		t.Errorf("after exchanging w and z, Lstat(z/y) = %v", err)
	}
}

// TestValidPathTakesAnyBytes: the path API takes every name ext4 can hold
// (any bytes but "/" and NUL, UTF-8 or not) and refuses every spelling that
// is not clean or could climb.
func TestValidPathTakesAnyBytes(t *testing.T) {
	for p, want := range map[string]bool{
		".": true, "a": true, "a/b": true, "caf\xe9/\xff": true, "...": true, "a\x1b[2J": true,
		"": false, "/a": false, "a/": false, "a//b": false, "./a": false, "a/.": false,
		"..": false, "a/../b": false, "a\x00b": false, "\xff/..": false,
	} {
		if got := ValidPath(p); got != want {
			t.Errorf("ValidPath(%q) = %v, want %v", p, got, want)
		}
	}
}
