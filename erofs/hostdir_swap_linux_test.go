package erofs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAddDirSwapped: a file replaced or rewritten between AddDir and
// WriteTo (by a fifo, a directory, a symlink, a device, a bigger, smaller
// or other file) is an error naming it, never a hang and never other
// bytes in the image: from the parallel writer into a file, which checks
// a small file by where its one read ends and a large one by an fstat at
// open, and from the stream writer, in both profiles (the full one reads
// a small file into its inline tail), for a file small enough to be all
// tail, one of blocks and a tail, and one copied by copy_file_range.
func TestAddDirSwapped(t *testing.T) {
	swaps := []struct {
		name string
		swap func(p string, size int) error // EPERM: cannot here (mknod)
		want string                         // in the error besides the path (SIZE±1: the sizes)
	}{
		{"fifo", func(p string, _ int) error { return replace(p, func(q string) error { return unix.Mkfifo(q, 0o644) }) }, "now a fifo"},
		{"directory", func(p string, _ int) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755) // rename cannot put a directory over a file
		}, "now a directory"},
		{"symlink", func(p string, _ int) error {
			return replace(p, func(q string) error { return os.Symlink("/dev/zero", q) })
		}, "symbolic link"},
		{"char device", func(p string, _ int) error {
			return replace(p, func(q string) error { return unix.Mknod(q, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))) }) // /dev/zero
		}, "now a character device"},
		{"grew", func(p string, size int) error { return os.WriteFile(p, payload(1, size+1), 0o644) }, "now SIZE+1 bytes"},
		{"shrank", func(p string, size int) error { return os.WriteFile(p, payload(1, size-1), 0o644) }, "now SIZE-1 bytes"},
		{"bigger file", func(p string, size int) error {
			return replace(p, func(q string) error { return os.WriteFile(q, payload(2, 2*size), 0o644) })
		}, "changed"},
		{"gone", func(p string, _ int) error { return os.Remove(p) }, "no such file"},
	}
	for _, size := range []int{100, 10000, directMin + 5000} {
		for _, sw := range swaps {
			for _, prof := range []Profile{ProfileFull, ProfileRuntime} {
				for _, into := range []string{"file", "stream"} {
					t.Run(fmt.Sprintf("%d/%s/%s/%s", size, sw.name, prof, into), func(t *testing.T) {
						src := t.TempDir()
						p := filepath.Join(src, "f")
						if err := os.WriteFile(p, payload(1, size), 0o644); err != nil {
							t.Fatal(err)
						}
						b := NewBuilder(Options{Profile: prof, Workers: 2})
						defer b.Close()
						if err := b.AddDir(src); err != nil {
							t.Fatal(err)
						}
						if err := sw.swap(p, size); errors.Is(err, unix.EPERM) {
							t.Skipf("%s: %v", sw.name, err)
						} else if err != nil {
							t.Fatal(err)
						}
						want := strings.NewReplacer("SIZE+1", fmt.Sprint(size+1), "SIZE-1", fmt.Sprint(size-1)).Replace(sw.want)
						var fs unix.Statfs_t
						if sw.name == "char device" && unix.Statfs(src, &fs) == nil && fs.Flags&unix.ST_NODEV != 0 {
							// On a nodev mount (systemd's /tmp) the open itself
							// is refused: still an error naming the file.
							want = "permission denied"
						}
						err := writeWithin(t, b, into)
						if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
							t.Fatalf("WriteTo after the file was swapped = %v, want an error naming %s and saying %q", err, p, want)
						}
					})
				}
			}
		}
	}
}

// replace puts what mk makes at q in p's place, by rename (a new inode).
func replace(p string, mk func(q string) error) error {
	q := p + ".new"
	if err := mk(q); err != nil {
		return err
	}
	return os.Rename(q, p)
}

// writeWithin writes b's image into a file (the parallel writer) or a
// stream and fails the test if that takes more than a minute (a hang).
func writeWithin(t *testing.T, b *Builder, into string) error {
	t.Helper()
	var w io.Writer = io.Discard
	if into == "file" {
		f, err := os.Create(filepath.Join(t.TempDir(), "img.erofs"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.WriteTo(w)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("WriteTo hung on a swapped file")
		return nil
	}
}

// TestAddDirRuntimeXattrs: the runtime profile stores no xattrs, and
// AddDir still reports each one it drops, on a file, a directory and the
// root, by path and name, and counts them (as any user: user.* xattrs);
// the full profile stores them all, the root's too (regression: the
// root's values were read through its /proc/self/fd link without
// following it, so they were lost in both profiles).
func TestAddDirRuntimeXattrs(t *testing.T) {
	src := t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "d", "f"), payload(3, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, x := range [][2]string{{".", "user.root"}, {"d", "user.dir"}, {"d/f", "user.b"}, {"d/f", "user.a"}} {
		if err := unix.Setxattr(filepath.Join(src, x[0]), x[1], []byte("v"), 0); errors.Is(err, unix.ENOTSUP) {
			t.Skipf("%s takes no user xattrs: %v", src, err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range workerCounts {
		b := NewBuilder(Options{Profile: ProfileRuntime, Workers: w})
		if err := b.AddDir(src); err != nil {
			t.Fatal(err)
		}
		r := b.Report()
		want := []string{
			".: dropped xattr user.root (runtime profile stores no xattrs)",
			"d/f: dropped xattr user.a (runtime profile stores no xattrs)",
			"d/f: dropped xattr user.b (runtime profile stores no xattrs)",
			"d: dropped xattr user.dir (runtime profile stores no xattrs)",
		}
		if !slices.Equal(r.Warnings, want) || r.Dropped != 4 {
			t.Errorf("%d workers: warnings %q (%d dropped), want %q", w, r.Warnings, r.Dropped, want)
		}
		b.Close()
	}
	b := NewBuilder(Options{Workers: 2})
	defer b.Close()
	if err := b.AddDir(src); err != nil {
		t.Fatal(err)
	}
	_, img := build(t, b)
	for _, x := range [][2]string{{".", "user.root"}, {"d", "user.dir"}, {"d/f", "user.a"}, {"d/f", "user.b"}} {
		h, err := img.Lstat(x[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(h.Xattrs[x[1]]) != "v" {
			t.Errorf("full profile: %s has xattrs %q, want %s=v", x[0], h.Xattrs, x[1])
		}
	}
	if r := b.Report(); r.Dropped != 0 {
		t.Errorf("full profile dropped %d: %q", r.Dropped, r.Warnings)
	}
}
