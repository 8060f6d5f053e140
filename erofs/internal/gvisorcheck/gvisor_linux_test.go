package gvisorcheck

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	gerofs "gvisor.dev/gvisor/pkg/erofs"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/erofstest"
)

// TestGvisorReadsRuntimeProfile opens a runtime-profile image with gVisor's
// own reader (the Sentry's) and walks it: names, types, modes, owners,
// sizes, nlink, mtimes, symlink targets, contents and hard-link groups
// must match the tree that was built.
func TestGvisorReadsRuntimeProfile(t *testing.T) {
	b := erofs.NewBuilder(erofs.Options{Profile: erofs.ProfileRuntime, TempDir: t.TempDir()})
	defer b.Close()
	erofstest.Populate(t, b, erofstest.TreeSpec{BigDir: 20000, Deep: 60})
	file := filepath.Join(t.TempDir(), "runtime.erofs")
	out, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := gerofs.OpenImage(f) // takes ownership of f
	if err != nil {
		t.Fatalf("gVisor refused the image: %v", err)
	}
	defer img.Close()

	groups := map[uint64]uint64{} // builder ino → gVisor nid
	visited := 0
	var walk func(p string, nid uint64)
	walk = func(p string, nid uint64) {
		visited++
		in, err := img.Inode(nid)
		if err != nil {
			t.Fatalf("%s: gVisor: %v", p, err)
		}
		want, err := b.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if uint32(in.Mode()) != want.Mode || in.UID() != want.UID || in.GID() != want.GID {
			t.Errorf("%s: gVisor sees mode %#o owner %d:%d, want %#o %d:%d", p, in.Mode(), in.UID(), in.GID(), want.Mode, want.UID, want.GID)
		}
		if got := time.Unix(int64(in.Mtime()), int64(in.MtimeNsec())); !got.Equal(want.Mtime) {
			t.Errorf("%s: gVisor mtime %v, want %v", p, got, want.Mtime)
		}
		if in.Nlink() != want.Nlink {
			t.Errorf("%s: gVisor nlink %d, want %d", p, in.Nlink(), want.Nlink)
		}
		switch {
		case in.IsDir():
			var names []string
			kids := map[string]uint64{}
			err := in.IterDirents(func(name string, typ uint8, child uint64) error {
				if name != "." && name != ".." {
					names = append(names, name)
					kids[name] = child
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: gVisor IterDirents: %v", p, err)
			}
			wantNames, _ := b.ReadDir(p)
			if len(names) != len(wantNames) {
				t.Fatalf("%s: gVisor lists %d entries, want %d", p, len(names), len(wantNames))
			}
			for i, n := range wantNames {
				if names[i] != n {
					t.Fatalf("%s: entry %d is %q, want %q", p, i, names[i], n)
				}
				// Lookup is gVisor's binary search over our blocks.
				if got, err := in.Lookup(n); err != nil || got != kids[n] {
					t.Errorf("%s/%s: gVisor Lookup = %d, %v; IterDirents said %d", p, n, got, err, kids[n])
				}
				walk(path.Join(p, n), kids[n])
			}
		case in.IsRegular():
			if g, ok := groups[want.Ino]; ok && g != nid {
				t.Errorf("%s: hard link group split in gVisor's view", p)
			}
			groups[want.Ino] = nid
			if int64(in.Size()) != want.Size {
				t.Errorf("%s: gVisor size %d, want %d", p, in.Size(), want.Size)
			}
			// The Sentry mmaps regular files from the image: only a
			// FLAT_PLAIN inode gives it an offset.
			if _, err := in.DataOffset(); err != nil && in.Size() > 0 {
				t.Errorf("%s: gVisor cannot map it: %v", p, err)
			}
			ranges, err := in.DataRanges()
			if err != nil {
				t.Fatalf("%s: gVisor DataRanges: %v", p, err)
			}
			var got []byte
			for _, r := range ranges {
				got = append(got, r.Bytes...)
			}
			if !bytes.Equal(got, erofstest.ReadAll(t, b, p)) {
				t.Errorf("%s: gVisor reads different contents", p)
			}
		case in.IsSymlink():
			if target, err := in.Readlink(); err != nil || target != want.Linkname {
				t.Errorf("%s: gVisor Readlink = %.40q, %v; want %.40q", p, target, err, want.Linkname)
			}
		}
	}
	walk(".", img.RootNid())
	if visited < 20000 {
		t.Fatalf("walked only %d inodes", visited)
	}
}
