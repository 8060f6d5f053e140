package reflink

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// region is a range of data in a test file; the rest is a hole.
type region struct{ off, len int64 }

// makeSparse writes a size-byte file at path holding pseudo-random data in
// regions and holes elsewhere, and returns its contents.
func makeSparse(t testing.TB, path string, size int64, regions []region, perm fs.FileMode) []byte {
	t.Helper()
	return writeSparse(t, path, size, regions, perm, true)
}

// writeSparse is makeSparse, with the fsync optional.
func writeSparse(t testing.TB, path string, size int64, regions []region, perm fs.FileMode, sync bool) []byte {
	t.Helper()
	want := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), uint64(len(regions))))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, rg := range regions {
		b := want[rg.off : rg.off+rg.len]
		for i := range b {
			b[i] = byte(r.Uint32() | 1) // never zero: data is not a hole
		}
		if _, err := f.WriteAt(b, rg.off); err != nil {
			t.Fatal(err)
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func dataLen(regions []region) (n int64) {
	for _, r := range regions {
		n += r.len
	}
	return n
}

func mustEqualFile(t testing.TB, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: contents differ from the source (len %d, want %d)", path, len(got), len(want))
	}
}

// mustOnlyFiles fails if dir holds anything but names (a temporary left
// behind, a destination made despite an error).
func mustOnlyFiles(t testing.TB, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if e.Name() != "lost+found" {
			got = append(got, e.Name())
		}
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Always, Auto, Never} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Error("ParseMode accepted sometimes")
	}
	if Mode(0) != Always {
		t.Error("the zero Mode must be Always: asking for a clone must never copy by default")
	}
}

var sparseCases = []struct {
	name    string
	size    int64
	regions []region
}{
	{"empty", 0, nil},
	{"tiny", 5, []region{{0, 5}}},
	{"all-hole", 3 << 20, nil},
	{"unaligned-tail", 1<<20 + 77, []region{{0, 4096}, {1 << 20, 77}}},
	{"holes-and-data", 9 << 20, []region{{0, 8192}, {1 << 20, 2 << 20}, {7 << 20, 4096}}},
}

func TestNeverCopiesKeepingContentsAndMode(t *testing.T) {
	for _, tc := range sparseCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "golden"), filepath.Join(dir, "ep")
			want := makeSparse(t, src, tc.size, tc.regions, 0o640)
			res, err := CloneFile(src, dst, Options{Mode: Never})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := CloneFile(src, dst+"-nosync", Options{Mode: Never, NoSync: true}); err != nil {
				t.Fatal(err)
			}
			mustEqualFile(t, dst+"-nosync", want)
			os.Remove(dst + "-nosync")
			if res.Method != MethodCopy || res.Size != tc.size {
				t.Errorf("result %+v, want a copy of %d bytes", res, tc.size)
			}
			if res.Copied < dataLen(tc.regions) || res.Copied > tc.size {
				t.Errorf("copied %d bytes, want between the %d data bytes and the size %d", res.Copied, dataLen(tc.regions), tc.size)
			}
			mustEqualFile(t, dst, want)
			fi, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want 0640 like the source", fi.Mode())
			}
			mustOnlyFiles(t, dir, "ep", "golden")
		})
	}
}

func TestCopySkipZeros(t *testing.T) {
	for _, tc := range sparseCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want := makeSparse(t, filepath.Join(dir, "src"), tc.size, tc.regions, 0o600)
			src, err := os.Open(filepath.Join(dir, "src"))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			dst, err := os.Create(filepath.Join(dir, "dst"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			if err := dst.Truncate(tc.size); err != nil {
				t.Fatal(err)
			}
			n, err := copySkipZeros(dst, src, tc.size)
			if err != nil {
				t.Fatal(err)
			}
			// Regions are 4 KiB-aligned except the tails; zero blocks are skipped.
			var wantN int64
			for _, r := range tc.regions {
				wantN += min(r.len, tc.size-r.off)
			}
			if n != wantN {
				t.Errorf("copied %d bytes, want only the %d data bytes", n, wantN)
			}
			mustEqualFile(t, dst.Name(), want)
		})
	}
}

func TestCopyDetectsShrinkingSource(t *testing.T) {
	dir := t.TempDir()
	makeSparse(t, filepath.Join(dir, "src"), 8192, []region{{0, 8192}}, 0o600)
	src, _ := os.Open(filepath.Join(dir, "src"))
	defer src.Close()
	dst, _ := os.Create(filepath.Join(dir, "dst"))
	defer dst.Close()
	// The caller believes the file is longer than it is.
	if _, err := copySkipZeros(dst, src, 1<<20); err == nil {
		t.Fatal("copySkipZeros: no error for a source shorter than its size")
	}
	if _, err := copyData(dst, src, 1<<20, false); err == nil {
		t.Fatal("copyData: no error for a source shorter than its size")
	}
}

func TestRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "golden"), filepath.Join(dir, "ep")
	want := makeSparse(t, src, 64<<10, []region{{0, 64 << 10}}, 0o644)
	if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Mode{Always, Auto, Never} {
		_, err := CloneFile(src, dst, Options{Mode: m})
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("mode %v over an existing file: err %v, want fs.ErrExist", m, err)
		}
		mustEqualFile(t, dst, []byte("keep me"))
	}
	if _, err := CloneFile(src, dst, Options{Mode: Auto, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	mustEqualFile(t, dst, want)
	mustOnlyFiles(t, dir, "ep", "golden")
}

func TestRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "golden")
	makeSparse(t, src, 4096, []region{{0, 4096}}, 0o644)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, dst string
		opts           Options
		is             error
	}{
		{"source is a directory", sub, filepath.Join(dir, "x"), Options{Mode: Auto}, ErrNotRegular},
		{"source missing", filepath.Join(dir, "nope"), filepath.Join(dir, "x"), Options{Mode: Auto}, fs.ErrNotExist},
		{"destination dir missing", src, filepath.Join(dir, "nodir", "x"), Options{Mode: Never}, fs.ErrNotExist},
		{"replace a directory", src, sub, Options{Mode: Auto, Overwrite: true}, ErrNotRegular},
		{"onto itself", src, src, Options{Mode: Auto, Overwrite: true}, nil},
		{"bad mode", src, filepath.Join(dir, "x"), Options{Mode: 9}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CloneFile(tc.src, tc.dst, tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err %v, want %v", err, tc.is)
			}
			mustOnlyFiles(t, dir, "golden", "sub")
		})
	}
}

// TestAlwaysNeverCopies runs wherever the tests run: on a filesystem that
// clones, Always clones; on one that cannot, it fails with the clear error
// and leaves nothing behind. Either way it never copies.
func TestAlwaysNeverCopies(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "golden"), filepath.Join(dir, "ep")
	want := makeSparse(t, src, 1<<20, []region{{0, 1 << 20}}, 0o644)
	ok, err := Supported(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := CloneFile(src, dst, Options{})
	if ok {
		if err != nil || res.Method != MethodClone || res.Copied != 0 {
			t.Fatalf("Supported said yes, CloneFile gave %+v, %v", res, err)
		}
		mustEqualFile(t, dst, want)
		return
	}
	t.Logf("%s cannot clone: %v", dir, err)
	var nse *NotSupportedError
	if !errors.Is(err, ErrNotSupported) || !errors.As(err, &nse) {
		t.Fatalf("err %v, want a *NotSupportedError", err)
	}
	if !strings.Contains(err.Error(), "auto") {
		t.Errorf("error %q does not say what to use instead", err)
	}
	mustOnlyFiles(t, dir, "golden")
}

// TestRacingClonesOneWins: the existence check is the rename itself, so of
// several clones racing for one name exactly one wins and the others get
// fs.ErrExist, leaving no temporary file behind.
func TestRacingClonesOneWins(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "golden"), filepath.Join(dir, "ep")
	want := makeSparse(t, src, 256<<10, []region{{0, 256 << 10}}, 0o644)
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := CloneFile(src, dst, Options{Mode: Never, NoSync: true})
			errs <- err
		}()
	}
	wins := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, fs.ErrExist):
			t.Errorf("a losing clone failed with %v, want fs.ErrExist", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d clones won the race for one name, want 1", wins)
	}
	mustEqualFile(t, dst, want)
	mustOnlyFiles(t, dir, "ep", "golden")
}

// TestFinishLate: with a clone whose fsync is left to after the rename
// (cloneNew on XFS), finish renames first and then fsyncs it, and when the
// rename fails (DST appeared meanwhile, no Overwrite) it only closes it and
// reports DST as existing, leaving it untouched.
func TestFinishLate(t *testing.T) {
	dir := t.TempDir()
	tmp, dst := filepath.Join(dir, ".dst.tmp-1"), filepath.Join(dir, "dst")
	if err := os.WriteFile(tmp, []byte("clone"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls []string
	late := func(sync bool) error {
		_, err := os.Stat(dst)
		calls = append(calls, fmt.Sprintf("sync=%v dst-exists=%v", sync, err == nil))
		return nil
	}
	if err := finish(tmp, dst, 0o644, Options{}, true, late); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sync=true dst-exists=true"}; !slices.Equal(calls, want) {
		t.Fatalf("late calls %q, want %q", calls, want)
	}
	mustEqualFile(t, dst, []byte("clone"))

	calls = nil
	if err := os.WriteFile(tmp, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := finish(tmp, dst, 0o644, Options{}, true, late)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("finish onto an existing DST without Overwrite: %v, want ErrExist", err)
	}
	if want := []string{"sync=false dst-exists=true"}; !slices.Equal(calls, want) {
		t.Fatalf("late calls %q, want %q (closed, not synced)", calls, want)
	}
	mustEqualFile(t, dst, []byte("clone"))
}
