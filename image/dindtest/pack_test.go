package dindtest

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
)

// tarNames maps each entry name of a tar (without a trailing slash) to
// its header, failing on duplicates.
func tarNames(t *testing.T, r io.Reader) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		n := h.Name
		if len(n) > 1 && n[len(n)-1] == '/' {
			n = n[:len(n)-1]
		}
		if _, dup := out[n]; dup {
			t.Fatalf("duplicate entry %s", n)
		}
		out[n] = h
	}
}

func TestPackRootfs(t *testing.T) {
	root := t.TempDir()
	mk := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/bin/a", "hello")
	mk("proc/self-should-be-skipped", "x")
	mk("dev/null-should-be-skipped", "x")
	mk("etc/empty", "")
	linked := os.Link(filepath.Join(root, "usr/bin/a"), filepath.Join(root, "usr/bin/b")) == nil
	if err := os.Symlink("a", filepath.Join(root, "usr/bin/c")); err != nil && goruntime.GOOS != "windows" {
		t.Fatal(err)
	}
	blobs := t.TempDir()
	l, err := packRootfs(root, blobs)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := tarNames(t, rc)
	for _, n := range []string{"usr", "usr/bin", "usr/bin/a", "proc", "dev", "etc/empty"} {
		if got[n] == nil {
			t.Errorf("missing %s", n)
		}
	}
	for _, n := range []string{"proc/self-should-be-skipped", "dev/null-should-be-skipped"} {
		if got[n] != nil {
			t.Errorf("%s packed", n)
		}
	}
	if h := got["usr/bin/a"]; h != nil && (h.Size != 5 || h.Mode&0o777 != 0o640 && goruntime.GOOS != "windows") {
		t.Errorf("usr/bin/a: size %d mode %o", h.Size, h.Mode)
	}
	if h := got["usr/bin/b"]; linked && (h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/a") {
		t.Errorf("usr/bin/b: want a hard link to usr/bin/a, got %+v", h)
	}
	if h := got["usr/bin/c"]; goruntime.GOOS != "windows" && (h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "a") {
		t.Errorf("usr/bin/c: want a symlink to a, got %+v", h)
	}
	d, _ := l.Digest()
	if st, err := os.Stat(filepath.Join(blobs, d.Hex)); err != nil {
		t.Fatal(err)
	} else if sz, _ := l.Size(); st.Size() != sz {
		t.Fatalf("blob size %d, layer says %d", st.Size(), sz)
	}
}
