package dindtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// fakeEntry builds a small one-image layout (two random layers) instead of
// the debootstrap image, and counts its builds.
type fakeEntry struct {
	builds int
	check  error // what builder.check returns
}

func (fe *fakeEntry) builder() builder {
	return builder{
		entry: "dind-0123456789abcdef",
		check: func() error { return fe.check },
		build: func(ctx context.Context, work, layoutDir string) error {
			fe.builds++
			p, err := layout.Write(layoutDir, empty.Index)
			if err != nil {
				return err
			}
			img, err := random.Image(4096, 2)
			if err != nil {
				return err
			}
			return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": Ref}))
		},
	}
}

// cacheRoot is a cache directory path that does not exist yet.
func cacheRoot(t *testing.T) string { return filepath.Join(t.TempDir(), "cache") }

func mustLayout(t *testing.T, dir string, fe *fakeEntry) string {
	t.Helper()
	p, err := cachedLayout(context.Background(), dir, fe.builder())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sums maps every file under dir to its sha256.
func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSums(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s changed (or went missing)", what, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s appeared", what, k)
		}
	}
}

// TestCopyLayoutEditsStayPrivate is the shared-machine finding: one user
// edits their copy of the daemon layout (adds a layer, which rewrites
// index.json; scribbles over index.json and oci-layout) and neither the
// cache nor a second copy made from it afterwards may change.
func TestCopyLayoutEditsStayPrivate(t *testing.T) {
	dir, fe := cacheRoot(t), &fakeEntry{}
	src := mustLayout(t, dir, fe)
	before := sums(t, src)

	mine := filepath.Join(t.TempDir(), "mine")
	if err := CopyLayout(src, mine); err != nil {
		t.Fatal(err)
	}
	sameSums(t, "fresh copy", sums(t, mine), before)
	p, err := layout.FromPath(mine)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(extra); err != nil {
		t.Fatalf("adding an image to my copy: %v", err)
	}
	for _, f := range []string{"index.json", "oci-layout"} {
		if err := os.WriteFile(filepath.Join(mine, f), []byte("{\"mine\": true}\n"), 0o644); err != nil {
			t.Fatalf("editing my copy's %s: %v", f, err)
		}
	}
	// The shared blobs are read-only: an edit through the link fails
	// for anyone but root (whose edits the digest check catches, see
	// TestCacheDamage).
	blobs, _ := os.ReadDir(filepath.Join(src, "blobs", "sha256"))
	for _, b := range blobs {
		fi, err := os.Stat(filepath.Join(mine, "blobs", "sha256", b.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("blob %s in the copy has mode %#o: writable through a hard link into the cache", b.Name(), fi.Mode().Perm())
		}
	}

	sameSums(t, "cache entry after my edits", sums(t, src), before)
	again := mustLayout(t, dir, fe)
	if fe.builds != 1 {
		t.Errorf("the entry was built %d times; the edits should not have touched it", fe.builds)
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := CopyLayout(again, theirs); err != nil {
		t.Fatal(err)
	}
	sameSums(t, "a second copy", sums(t, theirs), before)
	if _, err := layout.ImageIndexFromPath(theirs); err != nil {
		t.Errorf("the second copy is not a layout: %v", err)
	}
}

// TestCacheDamage damages a cached entry the ways a hard-linked edit, a
// crash or a stray rm can, and wants it rebuilt when this machine can
// build, or else an error naming the entry and the fix, never the damaged
// layout.
func TestCacheDamage(t *testing.T) {
	blob := func(t *testing.T, entry string, largest bool) string {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(entry, "blobs", "sha256"))
		if err != nil || len(ents) == 0 {
			t.Fatal(ents, err)
		}
		best, bestSize := "", int64(-1)
		for _, e := range ents {
			fi, _ := e.Info()
			if (largest && fi.Size() > bestSize) || (!largest && (bestSize < 0 || fi.Size() < bestSize)) {
				best, bestSize = e.Name(), fi.Size()
			}
		}
		return filepath.Join(entry, "blobs", "sha256", best)
	}
	// Root writes through 0444; anyone else chmods first (the owner may).
	write := func(t *testing.T, p string, edit func(f *os.File) error) {
		t.Helper()
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := edit(f); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, want string
		damage     func(t *testing.T, entry string)
	}{
		{"flipped byte in a layer", "does not match its name", func(t *testing.T, entry string) {
			write(t, blob(t, entry, true), func(f *os.File) error {
				b := make([]byte, 1)
				if _, err := f.ReadAt(b, 100); err != nil {
					return err
				}
				b[0] ^= 0x40
				_, err := f.WriteAt(b, 100)
				return err
			})
		}},
		{"truncated index.json", "index.json", func(t *testing.T, entry string) {
			write(t, filepath.Join(entry, "index.json"), func(f *os.File) error { return f.Truncate(10) })
		}},
		{"deleted blob", "is missing", func(t *testing.T, entry string) {
			if err := os.Remove(blob(t, entry, false)); err != nil {
				t.Fatal(err)
			}
		}},
		{"index.json rewritten through a hard link", "is missing", func(t *testing.T, entry string) {
			// What the shared-machine user's edit did: a new manifest
			// in index.json whose blobs are only in their copy.
			write(t, filepath.Join(entry, "index.json"), func(f *os.File) error {
				var idx v1.IndexManifest
				if err := json.NewDecoder(f).Decode(&idx); err != nil {
					return err
				}
				other := sha256.Sum256([]byte("a manifest only in their copy"))
				idx.Manifests[0].Digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(other[:])}
				b, err := json.Marshal(&idx)
				if err != nil {
					return err
				}
				if err := f.Truncate(0); err != nil {
					return err
				}
				_, err = f.WriteAt(b, 0)
				return err
			})
		}},
		{"blob made group-writable", "writable by group or others", func(t *testing.T, entry string) {
			if err := os.Chmod(blob(t, entry, false), 0o664); err != nil {
				t.Fatal(err)
			}
		}},
		{"stray file in the entry", "unexpected", func(t *testing.T, entry string) {
			if err := os.WriteFile(filepath.Join(entry, "blobs", "sha256", "notes.txt"), nil, 0o444); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, canBuild := range []bool{true, false} {
				dir, fe := cacheRoot(t), &fakeEntry{}
				entry := mustLayout(t, dir, fe)
				c.damage(t, entry)
				if !canBuild {
					fe.check = ErrNotRoot
					_, err := cachedLayout(context.Background(), dir, fe.builder())
					if !errors.Is(err, ErrDamaged) || IsUnavailable(err) {
						t.Fatalf("cannot rebuild: got %v, want ErrDamaged (and no skip)", err)
					}
					for _, s := range []string{entry, c.want, "remove " + entry + "; the next run rebuilds it"} {
						if !strings.Contains(err.Error(), s) {
							t.Errorf("error %q does not say %q", err, s)
						}
					}
					continue
				}
				got, err := cachedLayout(context.Background(), dir, fe.builder())
				if err != nil {
					t.Fatalf("rebuild: %v", err)
				}
				if fe.builds != 2 || got != entry {
					t.Fatalf("got %s after %d builds, want %s rebuilt", got, fe.builds, entry)
				}
				if err := VerifyLayout(got, ""); err != nil {
					t.Fatalf("the rebuilt entry: %v", err)
				}
			}
		})
	}
}

// TestVerifiedMarker: an unchanged old blob is trusted by its stamp, and
// any write to it (which moves its mtime) makes it hashed again.
func TestVerifiedMarker(t *testing.T) {
	dir, fe := cacheRoot(t), &fakeEntry{}
	entry := mustLayout(t, dir, fe)
	marker := filepath.Join(dir, markerName(fe.builder().entry))
	old := time.Now().Add(-time.Hour)
	ents, _ := os.ReadDir(filepath.Join(entry, "blobs", "sha256"))
	var layer string
	for _, e := range ents {
		p := filepath.Join(entry, "blobs", "sha256", e.Name())
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		if fi, _ := e.Info(); fi.Size() > 1000 {
			layer = p
		}
	}
	if err := VerifyLayout(entry, marker); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(marker)
	if err != nil || !strings.Contains(string(b), filepath.Base(layer)) {
		t.Fatalf("marker %s: %s, %v; want a stamp for %s", marker, b, err, layer)
	}
	// A write through a hard link, as root does it (0444 does not stop
	// root): the mtime moves, so the stamp no longer matches.
	body, _ := os.ReadFile(layer)
	body[0] ^= 1
	if err := os.Chmod(layer, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layer, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyLayout(entry, marker); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a written blob passed on its old stamp: %v", err)
	}
}

// TestCacheDirNotYours: a cache directory another user made (in /var/tmp
// anyone can make /var/tmp/gvx-test-cache-0 first), one anyone may write
// to, or a symlink is refused with an error that names it and the fix,
// and nothing in it is used.
func TestCacheDirNotYours(t *testing.T) {
	cases := []struct {
		name  string
		root  bool
		setup func(t *testing.T, dir string)
	}{
		{"mode 0777", false, func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"group-writable", false, func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o775); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink", false, func(t *testing.T, dir string) {
			real := dir + ".real"
			if err := os.Rename(dir, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"owned by nobody", true, func(t *testing.T, dir string) {
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			// The other user's cache holds a valid entry under the
			// right name: it would be used as is.
			dir, fe := cacheRoot(t), &fakeEntry{}
			mustLayout(t, dir, fe)
			c.setup(t, dir)
			got, err := cachedLayout(context.Background(), dir, fe.builder())
			if !errors.Is(err, ErrUnsafeCache) {
				t.Fatalf("got %q, %v; want ErrUnsafeCache", got, err)
			}
			for _, s := range []string{dir, "rm -rf " + dir, CacheEnv} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if fe.builds != 1 {
				t.Errorf("built %d times in a directory that is not ours", fe.builds)
			}
		})
	}
	// An entry inside our own directory made by someone else (it was
	// once writable, or root put it there) is not used either.
	t.Run("entry owned by nobody", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown to another user needs root")
		}
		dir, fe := cacheRoot(t), &fakeEntry{}
		entry := mustLayout(t, dir, fe)
		if err := os.Lchown(filepath.Join(entry, "index.json"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		fe.check = ErrNotRoot
		if _, err := cachedLayout(context.Background(), dir, fe.builder()); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "uid 65534") {
			t.Fatalf("got %v; want ErrDamaged naming uid 65534", err)
		}
	})
}

// TestDefaultCacheDirPerUser: the default cache is the caller's own.
func TestDefaultCacheDirPerUser(t *testing.T) {
	t.Setenv(CacheEnv, "")
	want := "/var/tmp/gvx-test-cache-" + strconv.Itoa(os.Geteuid())
	if CacheDir() != want || DefaultCacheDir() != want {
		t.Errorf("CacheDir() = %q, DefaultCacheDir() = %q; want %q", CacheDir(), DefaultCacheDir(), want)
	}
	t.Setenv(CacheEnv, "/elsewhere")
	if CacheDir() != "/elsewhere" {
		t.Errorf("CacheDir ignores $%s", CacheEnv)
	}
}
