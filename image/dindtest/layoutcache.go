package dindtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"z.gfire.dev/gvx/internal/durable"
	"z.gfire.dev/gvx/internal/filehash"
	"z.gfire.dev/gvx/reflink"
)

// Errors about the cache itself (neither is IsUnavailable: a test fails on
// them instead of skipping, since a rebuild or a rm fixes them).
var (
	// ErrUnsafeCache: the cache directory is not the caller's own.
	ErrUnsafeCache = errors.New("dindtest: unsafe cache directory")
	// ErrDamaged: a cache entry does not match its digests.
	ErrDamaged = errors.New("dindtest: damaged cache entry")
)

// Bounds on what verification reads into memory.
const (
	maxLayoutFile   = 4 << 10 // oci-layout
	maxManifestFile = 4 << 20 // index.json and manifests
	maxIndexDepth   = 4       // nested indexes
)

// racyWindow: blobs modified more recently than this are not trusted by
// their stamp (see VerifyLayout).
const racyWindow = 2 * time.Second

// CheckCacheDir checks that dir is a directory (not a symlink) owned by
// the caller and writable by no one else: anything another local user can
// write into could hand every later run a layout of their choosing. It
// returns an error wrapping fs.ErrNotExist when dir does not exist, and
// one wrapping ErrUnsafeCache that names dir and the fix otherwise.
func CheckCacheDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("dindtest: cache dir: %w", err)
	}
	why := ""
	switch uid, ok := ownerOf(fi); {
	case fi.Mode()&fs.ModeSymlink != 0:
		why = "is a symlink"
	case !fi.IsDir():
		why = "is not a directory"
	case ok && uid != os.Geteuid():
		why = fmt.Sprintf("is owned by uid %d, not by you (uid %d)", uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		why = fmt.Sprintf("has mode %#o: writable by group or others", fi.Mode().Perm())
	}
	if why != "" {
		return fmt.Errorf("%w: %s %s; it must be your own directory, writable only by you: remove it (rm -rf %s) or set $%s to a directory of your own",
			ErrUnsafeCache, dir, why, dir, CacheEnv)
	}
	return nil
}

// damaged is the error for a bad cache entry: what is wrong and the fix.
func damaged(entry, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; remove %s; the next run rebuilds it", ErrDamaged, entry, fmt.Sprintf(format, args...), entry)
}

// privateFile checks one file or directory of an entry: not a symlink,
// the caller's own and not writable by group or others.
func privateFile(entry, rel string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.Mode().IsRegular() && !fi.IsDir() {
		return damaged(entry, "%s is a %v, not a regular file", rel, fi.Mode().Type())
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Geteuid() {
		return damaged(entry, "%s is owned by uid %d, not by you", rel, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return damaged(entry, "%s has mode %#o: writable by group or others", rel, fi.Mode().Perm())
	}
	return nil
}

// blobStamp identifies one unchanged blob file for the verified marker.
type blobStamp struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
}

// marker is what VerifyLayout records after hashing every blob.
type marker struct {
	Blobs map[string]blobStamp `json:"blobs"`
}

// VerifyLayout checks the OCI image layout in dir before it is handed
// out: its files are the caller's own and writable by no one else;
// oci-layout, index.json and every manifest parse; every blob they name
// is present with the named size; and every file in blobs/sha256 hashes
// to its name. The error wraps ErrDamaged and says what to remove.
//
// Hashing the layer (400-550 MB) costs about a second, and every test
// binary asks for the layout. So when markerPath is not empty the blobs'
// (device, inode, size, mtime) are recorded there after a full check, and
// a blob whose stamp is unchanged is not hashed again. Any write to a blob
// (through a hard link too) moves its mtime, and replacing it changes its
// inode; only utimes(2) by the owner or root can put an mtime back, which
// is deliberate, not the accidental edit through a hard link this guards
// against (the owner could rewrite the marker as well). A blob younger than
// racyWindow gets no stamp: an edit in the same coarse timestamp tick
// would keep its mtime (git's "racy" files). The marker lives
// beside the entry, never inside it, so no copy of the layout carries it.
func VerifyLayout(dir, markerPath string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return damaged(dir, "%v", err)
	}
	if err := privateFile(dir, ".", fi); err != nil {
		return err
	}
	if !fi.IsDir() {
		return damaged(dir, "not a directory")
	}
	top, err := os.ReadDir(dir)
	if err != nil {
		return damaged(dir, "%v", err)
	}
	for _, de := range top {
		switch de.Name() {
		case "oci-layout", "index.json", "blobs":
		default:
			return damaged(dir, "unexpected %s", de.Name())
		}
	}
	var lay struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := readJSON(dir, "oci-layout", maxLayoutFile, &lay); err != nil {
		return err
	}
	if lay.Version == "" {
		return damaged(dir, "oci-layout has no imageLayoutVersion")
	}
	var old marker
	if markerPath != "" {
		if b, err := readSmall(markerPath, maxManifestFile); err == nil {
			_ = json.Unmarshal(b, &old) // a bad marker only means hashing again
		}
	}
	blobs, stamps, err := checkBlobs(dir, old.Blobs)
	if err != nil {
		return err
	}
	var idx v1.IndexManifest
	if err := readJSON(dir, "index.json", maxManifestFile, &idx); err != nil {
		return err
	}
	if len(idx.Manifests) == 0 {
		return damaged(dir, "index.json names no image")
	}
	if err := checkDescs(dir, idx.Manifests, blobs, 0); err != nil {
		return err
	}
	if markerPath != "" {
		// A blob written within the last racyWindow may be written again
		// within the same timestamp tick (mtimes are coarse): record
		// only older ones, so a fresh blob is hashed again next time.
		for name, st := range stamps {
			if time.Since(time.Unix(0, st.MTime)) < racyWindow {
				delete(stamps, name)
			}
		}
		b, err := json.Marshal(marker{Blobs: stamps})
		if err == nil {
			_ = writeMarker(markerPath, b) // only a cost: the next run hashes again
		}
	}
	return nil
}

// checkBlobs checks every file in dir/blobs/sha256 (see VerifyLayout) and
// returns their sizes by hex digest and their stamps.
func checkBlobs(dir string, known map[string]blobStamp) (map[string]int64, map[string]blobStamp, error) {
	sizes, stamps := map[string]int64{}, map[string]blobStamp{}
	for _, d := range []string{"blobs", "blobs/sha256"} {
		fi, err := os.Lstat(filepath.Join(dir, d))
		if err != nil {
			return nil, nil, damaged(dir, "%v", err)
		}
		if err := privateFile(dir, d, fi); err != nil {
			return nil, nil, err
		}
		if !fi.IsDir() {
			return nil, nil, damaged(dir, "%s is not a directory", d)
		}
		ents, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			return nil, nil, damaged(dir, "%v", err)
		}
		for _, de := range ents {
			if d == "blobs" && de.Name() != "sha256" {
				return nil, nil, damaged(dir, "unexpected blobs/%s", de.Name())
			}
		}
	}
	bdir := filepath.Join(dir, "blobs", "sha256")
	ents, _ := os.ReadDir(bdir)
	for _, de := range ents {
		name, rel := de.Name(), "blobs/sha256/"+de.Name()
		if !isHex64(name) {
			return nil, nil, damaged(dir, "unexpected %s (not a sha256 digest)", rel)
		}
		fi, err := de.Info()
		if err != nil {
			return nil, nil, damaged(dir, "%s: %v", rel, err)
		}
		if err := privateFile(dir, rel, fi); err != nil {
			return nil, nil, err
		}
		if fi.IsDir() {
			return nil, nil, damaged(dir, "%s is a directory", rel)
		}
		st := stampOf(fi)
		if prev, ok := known[name]; !ok || prev != st || st.Ino == 0 {
			sum, err := filehash.SHA256(filepath.Join(bdir, name))
			if err != nil {
				return nil, nil, damaged(dir, "%s: %v", rel, err)
			}
			if sum != name {
				return nil, nil, damaged(dir, "%s has sha256 %s: its content does not match its name", rel, sum)
			}
		}
		if fi.Mode().Perm()&0o222 != 0 {
			// Read-only in the cache: an edit through a hard link in a
			// copy of the layout fails instead of changing the cache
			// (root's edits still go through, and the hash catches them).
			if err := os.Chmod(filepath.Join(bdir, name), 0o444); err != nil {
				return nil, nil, damaged(dir, "%s: %v", rel, err)
			}
		}
		sizes[name], stamps[name] = fi.Size(), st
	}
	return sizes, stamps, nil
}

// checkDescs checks that every descriptor names a present blob of its
// size, and descends into manifests and indexes.
func checkDescs(dir string, descs []v1.Descriptor, blobs map[string]int64, depth int) error {
	if depth > maxIndexDepth {
		return damaged(dir, "indexes nested deeper than %d", maxIndexDepth)
	}
	for _, d := range descs {
		if d.Digest.Algorithm != "sha256" || !isHex64(d.Digest.Hex) {
			return damaged(dir, "a descriptor names %q, not a sha256 digest", d.Digest)
		}
		size, ok := blobs[d.Digest.Hex]
		if !ok {
			return damaged(dir, "blob %s (%s) is missing", d.Digest, d.MediaType)
		}
		if size != d.Size {
			return damaged(dir, "blob %s is %d bytes, its descriptor says %d", d.Digest, size, d.Size)
		}
		rel := "blobs/sha256/" + d.Digest.Hex
		switch d.MediaType {
		case types.OCIManifestSchema1, types.DockerManifestSchema2:
			var m v1.Manifest
			if err := readJSON(dir, rel, maxManifestFile, &m); err != nil {
				return err
			}
			if err := checkDescs(dir, append([]v1.Descriptor{m.Config}, m.Layers...), blobs, depth+1); err != nil {
				return err
			}
		case types.OCIImageIndex, types.DockerManifestList:
			var m v1.IndexManifest
			if err := readJSON(dir, rel, maxManifestFile, &m); err != nil {
				return err
			}
			if err := checkDescs(dir, m.Manifests, blobs, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func readJSON(dir, rel string, limit int64, v any) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return damaged(dir, "%s: %v", rel, err)
	}
	if err := privateFile(dir, rel, fi); err != nil {
		return err
	}
	b, err := readSmall(p, limit)
	if err != nil {
		return damaged(dir, "%s: %v", rel, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return damaged(dir, "%s: %v", rel, err)
	}
	return nil
}

func readSmall(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// writeMarker replaces path with b (0644), durably.
func writeMarker(path string, b []byte) error {
	return durable.WriteFile(path, 0o644, durable.Options{}, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// CopyLayout puts a copy of the OCI layout src (a verified cache entry)
// in dst, created if needed, for a caller to edit as it likes: the blobs
// (content-addressed, read-only in the cache) are hard-linked when dst is
// on the same filesystem and cloned or copied otherwise; every other file
// (index.json, oci-layout) is cloned or copied, never linked, and made
// 0644, so rewriting it (adding a layer rewrites index.json) changes only
// dst. Files already in dst under the same names are replaced.
func CopyLayout(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("dindtest: %w", err)
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("dindtest: %s: not a regular file", p)
		}
		if err := os.Remove(out); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dindtest: %w", err)
		}
		blob := filepath.Dir(filepath.ToSlash(rel)) == "blobs/sha256" && isHex64(d.Name())
		if blob && os.Link(p, out) == nil {
			return nil
		}
		if _, err := reflink.CloneFile(p, out, reflink.Options{Mode: reflink.Auto, Overwrite: true, NoSync: true}); err != nil {
			return fmt.Errorf("dindtest: %w", err)
		}
		if !blob {
			if err := os.Chmod(out, 0o644); err != nil {
				return fmt.Errorf("dindtest: %w", err)
			}
		}
		return nil
	})
}

// sealLayout makes a freshly built layout read-only: files 0444,
// directories 0755 (layout.Write makes them with the umask's say).
func sealLayout(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o444)
		if d.IsDir() {
			mode = 0o755
		} else if !d.Type().IsRegular() {
			return fmt.Errorf("dindtest: %s: unexpected %v in a built layout", p, d.Type())
		}
		return os.Chmod(p, mode)
	})
}

// markerName is the verified marker of cache entry entry (hidden, beside
// it: `ls dind-*` lists only entries and their locks).
func markerName(entry string) string { return "." + strings.TrimPrefix(entry, ".") + ".verified" }
