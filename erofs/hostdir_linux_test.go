package erofs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
)

// workerCounts are the Options.Workers every parallel path is built with.
var workerCounts = []int{1, 2, 8}

// manyFilesDir writes a tree of n files of random sizes, from empty to
// 700 KiB (block-aligned ones, tails, runs through the writer's buffer
// and past it), some hard-linked, some symlinked, across nested
// directories, into dir.
func manyFilesDir(t *testing.T, dir string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(18, uint64(n)))
	sizes := []int{0, 1, 4095, 4096, 4097, 8192, 65536, 256 << 10, 256<<10 + 1, 700 << 10}
	if err := os.MkdirAll(filepath.Join(dir, "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i%37), fmt.Sprintf("e%d", i%5))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		size := rng.IntN(20 << 10)
		if i%7 == 0 {
			size = sizes[rng.IntN(len(sizes))]
		}
		p := filepath.Join(d, fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(p, payload(uint64(i), size), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			// Runs of tails only (in the full profile) and a block now
			// and then: batches of work whose blocks span less than the
			// writer's zero padding between others.
			tiny := 1 + i%4000
			if i%256 == 0 {
				tiny += 4096
			}
			if err := os.WriteFile(filepath.Join(dir, "tiny", fmt.Sprintf("t%05d", i)), payload(uint64(i), tiny), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		switch i % 50 {
		case 3:
			if err := os.Link(p, filepath.Join(dir, fmt.Sprintf("link%05d", i))); err != nil {
				t.Fatal(err)
			}
		case 4:
			if err := os.Symlink("../"+filepath.Base(p), p+".sym"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// hostSource is a tree on the host for AddDir: as root the hostile tree
// (devices, owners, trusted.* xattrs) copied out, plus many files; as
// anyone else the many files only.
func hostSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if os.Geteuid() == 0 {
		b := NewBuilder(Options{TempDir: t.TempDir()})
		defer b.Close()
		populate(t, b, treeSpec{BigDir: 2000, Deep: 60})
		// No host filesystem holds the 60 000-byte xattr value.
		if err := b.WriteFile(&sink.Header{Path: "xattrs/large", Mode: sink.TypeReg | 0o644}, nil); err != nil {
			t.Fatal(err)
		}
		if err := sink.Copy(hostTree(t, filepath.Join(src)), b); err != nil {
			t.Fatal(err)
		}
	}
	manyFilesDir(t, filepath.Join(src, "many"), 3000)
	return src
}

// imageFile writes b's image into a new file after prefix bytes and
// returns the image's bytes.
func imageFile(t *testing.T, b *Builder, prefix string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img.erofs")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(prefix + strings.Repeat("x", 1<<16)); err != nil {
		t.Fatal(err) // also past the image's start: WriteTo must cut it
	}
	if _, err := f.Seek(int64(len(prefix)), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteTo(f)
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != int64(len(prefix))+n {
		t.Fatalf("offset after WriteTo %d, want %d", off, int64(len(prefix))+n)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw[:len(prefix)]) != prefix || int64(len(raw)) != int64(len(prefix))+n {
		t.Fatalf("file of %d bytes around an image of %d: the prefix or the length is wrong", len(raw), n)
	}
	return raw[len(prefix):]
}

// TestAddDirWorkers builds one host tree with AddDir and 1, 2 and 8
// workers, into a file (the parallel writer) and into a stream, and
// checks every image is byte-identical to the one sink.Copy over
// sink/hostdir (the spooling path) gives; then fsck.erofs and, as root,
// the kernel's mount of it against the tree.
func TestAddDirWorkers(t *testing.T) {
	src := hostSource(t)
	for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
		t.Run(prof.String(), func(t *testing.T) {
			ref := NewBuilder(Options{Profile: prof, TempDir: t.TempDir()})
			defer ref.Close()
			if err := sink.Copy(ref, hostTree(t, src)); err != nil {
				t.Fatal(err)
			}
			want, _ := build(t, ref)
			sum := sha256.Sum256(want)
			for _, w := range workerCounts {
				fin := filepath.Join(t.TempDir(), "finished.erofs")
				b := NewBuilder(Options{Profile: prof, Workers: w, Path: fin})
				if err := b.AddDir(src); err != nil {
					t.Fatal(err)
				}
				if got := sha256.Sum256(imageFile(t, b, "abc")); got != sum {
					t.Errorf("%d workers, into a file: sha256 %x, want %x (sink.Copy's)", w, got, sum)
				}
				smallBatches(t, func() {
					if got := sha256.Sum256(imageFile(t, b, "")); got != sum {
						t.Errorf("%d workers, units of %d inodes: sha256 %x, want %x", w, batchInodes, got, sum)
					}
				})
				if got, _ := build(t, b); !bytes.Equal(got, want) {
					t.Errorf("%d workers, streamed: not the image sink.Copy gives", w)
				}
				// A hard-linked file's warning names whichever of its
				// paths a worker reached first; the rest is the same.
				if got, want := what(b.Report()), what(ref.Report()); !slices.Equal(got, want) {
					t.Errorf("%d workers: warnings about %q, want %q", w, got, want)
				}
				if w == 8 {
					img := filepath.Join(t.TempDir(), "img.erofs")
					if err := os.WriteFile(img, want, 0o644); err != nil {
						t.Fatal(err)
					}
					if out := run(t, needTool(t, "fsck.erofs"), img); strings.Contains(out, "<E>") {
						t.Fatalf("fsck.erofs: %s", out)
					}
					if os.Geteuid() == 0 {
						kernelCompare(t, b) // the builder's view (host files) vs the mount
					}
				}
				// Finish: the parallel writer with writeback started per
				// unit of work, then the atomic publish.
				if err := b.Finish(); err != nil {
					t.Fatal(err)
				}
				if got, err := os.ReadFile(fin); err != nil || sha256.Sum256(got) != sum {
					t.Errorf("%d workers, Finish: %d bytes (%v), not the image sink.Copy gives", w, len(got), err)
				}
			}
		})
	}
}

// smallBatches runs f with units of work of 3 inodes: many boundaries
// between workers.
func smallBatches(t *testing.T, f func()) {
	old := batchInodes
	batchInodes = 3
	defer func() { batchInodes = old }()
	f()
}

// what is what a report's warnings say, without the paths, sorted.
func what(r Report) []string {
	var out []string
	for _, w := range r.Warnings {
		_, msg, _ := strings.Cut(w, ": ")
		out = append(out, msg)
	}
	slices.Sort(out)
	return append(out, fmt.Sprint(r.Dropped))
}

// TestWriteToWorkers writes spooled trees (in memory, and on disk where
// copy_file_range copies from the spool) into files with 1, 2 and 8
// workers: the bytes are the stream's.
func TestWriteToWorkers(t *testing.T) {
	for _, lim := range []int64{0, -1} {
		t.Run(fmt.Sprintf("limit%d", lim), func(t *testing.T) {
			var want []byte
			for _, w := range workerCounts {
				b := NewBuilder(Options{MemoryLimit: lim, TempDir: t.TempDir(), Workers: w})
				populate(t, b, treeSpec{BigDir: 500, Deep: 5})
				for i := range 300 {
					size := (i * 7919 * 13) % (600 << 10)
					if err := b.WriteFile(&sink.Header{Path: fmt.Sprintf("f%04d", i), Mode: sink.TypeReg | 0o644, Size: int64(size)}, bytes.NewReader(payload(uint64(i), size))); err != nil {
						t.Fatal(err)
					}
				}
				if want == nil {
					want, _ = build(t, b)
				}
				if got := imageFile(t, b, ""); !bytes.Equal(got, want) {
					t.Errorf("%d workers: the file's image is not the stream's", w)
				}
				smallBatches(t, func() {
					if got := imageFile(t, b, ""); !bytes.Equal(got, want) {
						t.Errorf("%d workers, units of %d inodes: the file's image is not the stream's", w, batchInodes)
					}
				})
				b.Close()
			}
		})
	}
}

// TestAddDirChanged: a file that changes between AddDir and WriteTo is an
// error naming it, never a silently different image.
func TestAddDirChanged(t *testing.T) {
	src := t.TempDir()
	p := filepath.Join(src, "f")
	if err := os.WriteFile(p, payload(1, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(Options{})
	defer b.Close()
	if err := b.AddDir(src); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, payload(1, 9000), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := b.WriteTo(io.Discard)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("WriteTo after the file shrank = %v, want an error naming %s", err, p)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	_, err = b.WriteTo(io.Discard)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), p) {
		t.Fatalf("WriteTo after the file went = %v, want ErrNotExist naming %s", err, p)
	}
	if err := b.AddDir(filepath.Join(src, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("AddDir of a missing directory = %v, want ErrNotExist", err)
	}
}

// TestWriteToAppend: a file opened O_APPEND gets the stream (pwrite would
// append), and the same image after what it held.
func TestWriteToAppend(t *testing.T) {
	b := NewBuilder(Options{Workers: 2})
	defer b.Close()
	populate(t, b, treeSpec{Deep: 3})
	want, _ := build(t, b)
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(p)
	if string(got[:4]) != "head" || !bytes.Equal(got[4:], want) {
		t.Fatalf("O_APPEND file holds %d bytes, want head + the %d-byte image", len(got), len(want))
	}
}

// TestHostFileShrank: a host file shorter than its scanned size when read
// (it shrank after the open's check) is an error naming it, never zeros or
// a stale buffer in the image.
func TestHostFileShrank(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, payload(1, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &content{host: &hostFD{fd: fd, path: p}, size: 5000} // scanned at 5000 bytes
	defer c.close()
	if err := readFull(c, make([]byte, 4096), 0); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("readFull of a shrunk file = %v, want an error naming %s", err, p)
	}
	if err := readFull(c, make([]byte, 50), 0); err != nil {
		t.Fatalf("readFull inside what is left = %v", err)
	}
}

// TestAddDirUnreadable: a directory the scan cannot read fails AddDir
// with its path, and the workers stop (no hang), with any worker count.
func TestAddDirUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root reads a mode-0 directory: run this test again as nobody.
		asNobody(t, "TestAddDirUnreadable")
		return
	}
	src := t.TempDir()
	manyFilesDir(t, src, 200)
	bad := filepath.Join(src, "d05", "e0")
	if err := os.Chmod(bad, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(bad, 0o755)
	for _, w := range workerCounts {
		b := NewBuilder(Options{Workers: w})
		err := b.AddDir(src)
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%d workers: AddDir = %v, want a permission error naming %s", w, err, bad)
		}
		b.Close()
	}
}

// asNobody runs the test binary's test name as uid 65534 (from a copy in
// a directory of its own, its TMPDIR: the go build directory is private
// to root) and fails t if it fails or does not run.
func asNobody(t *testing.T, name string) {
	t.Helper()
	tmp := t.TempDir()
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(tmp); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(d, st.Mode().Perm())
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "erofs.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("%s as uid 65534: %v\n%s", name, err, out)
	}
}
