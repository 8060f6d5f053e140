package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image/imagetest"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

var ctx = context.Background()

func newCache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hermetic keeps tests away from the user's docker credentials.
func hermetic(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
}

// startRegistry serves go-containerregistry's in-process registry on
// loopback, optionally behind wrap, and returns its host:port.
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func mustTar(t *testing.T, es ...imagetest.Entry) []byte {
	t.Helper()
	b, err := imagetest.Tar(es...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureLayers are three layers that exercise whiteouts, opaque
// directories, type changes, hard links, xattrs and devices across layers.
func fixtureLayers(t *testing.T) [][]byte {
	t.Helper()
	x := func(e imagetest.Entry, k, v string) imagetest.Entry {
		e.Xattrs = map[string]string{k: v}
		return e
	}
	l1 := mustTar(t,
		imagetest.Dir("etc", 0o755),
		imagetest.File("etc/passwd", "root:x:0:0::/root:/bin/sh\n"),
		x(imagetest.File("etc/motd", "old motd\n"), "user.note", "layer1"),
		imagetest.Symlink("etc/link", "passwd"),
		imagetest.Dir("usr", 0o755), imagetest.Dir("usr/bin", 0o755),
		imagetest.Entry{Name: "usr/bin/tool", Type: tar.TypeReg, Mode: 0o4755, Body: "#!/bin/sh\necho tool\n"},
		imagetest.Entry{Name: "usr/bin/tool2", Type: tar.TypeLink, Linkname: "usr/bin/tool"},
		imagetest.Dir("var", 0o755), imagetest.Dir("var/lib", 0o755), imagetest.Dir("var/lib/app", 0o700),
		imagetest.File("var/lib/app/a", "a"), imagetest.File("var/lib/app/b", "b"),
		imagetest.Dir("var/lib/app/sub", 0o755), imagetest.File("var/lib/app/sub/deep", "deep"),
		imagetest.Dir("opt", 0o755), imagetest.Dir("opt/old", 0o755), imagetest.File("opt/old/f", "f"),
		imagetest.Dir("dev", 0o755),
		imagetest.Entry{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
		imagetest.Entry{Name: "dev/fifo", Type: tar.TypeFifo, Mode: 0o600},
		imagetest.File("gone-file", "bye"),
	)
	l2 := mustTar(t,
		imagetest.Dir("etc", 0o750),
		imagetest.Whiteout("etc", "motd"),
		imagetest.File("etc/passwd", "root:x:0:0::/root:/bin/sh\nu:x:1000:1000::/home/u:/bin/sh\n"),
		imagetest.Dir("var/lib/app", 0o755),
		imagetest.File("var/lib/app/c", "c"),
		imagetest.Opaque("var/lib/app"), // after its sibling: order must not matter
		imagetest.Whiteout("opt", "old"),
		imagetest.Whiteout("", "gone-file"),
		imagetest.Dir("home", 0o755),
		imagetest.Entry{Name: "home/u", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		imagetest.Entry{Name: "home/u/.profile", Type: tar.TypeReg, Mode: 0o600, UID: 1000, GID: 1000, Body: "export A=1\n"},
	)
	l3 := mustTar(t,
		imagetest.File("etc/link", "now a file\n"), // symlink → file
		imagetest.File("etc/motd", "new motd\n"),   // back after a whiteout
		imagetest.Opaque("opt"),                    // opaque over an already whited-out dir
		imagetest.File("opt/new", "n"),
		x(imagetest.Dir("home/u", 0o750), "user.dir", "3"),
		imagetest.File("usr/bin", "a file replacing a directory\n"),
	)
	return [][]byte{l1, l2, l3}
}

var fixtureConfig = v1.Config{
	Env:          []string{"PATH=/usr/bin:/bin", "A=1"},
	Entrypoint:   []string{"/usr/bin/tool"},
	Cmd:          []string{"--help"},
	WorkingDir:   "/home/u",
	User:         "1000:1000",
	ExposedPorts: map[string]struct{}{"8080/tcp": {}, "53/udp": {}},
}

func fixtureImage(t *testing.T, p v1.Platform, layers [][]byte) v1.Image {
	t.Helper()
	img, err := imagetest.Image(p, fixtureConfig, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}

// openEROFS reads back a cache file with the erofs reader.
func openEROFS(t *testing.T, path string) *erofs.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	im, err := erofs.Open(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return im
}

// checkFlattened compares the EROFS file with overlay.Flatten of the same
// layers into a MemFS.
func checkFlattened(t *testing.T, path string, profile string, layers [][]byte) {
	t.Helper()
	want := sinktest.NewMemFS()
	var rs []io.Reader
	for _, l := range layers {
		rs = append(rs, bytes.NewReader(l))
	}
	if err := overlay.Flatten(want, rs...); err != nil {
		t.Fatal(err)
	}
	o := sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreRoot: true}
	if profile == "runtime" {
		o.IgnoreXattrPrefixes = []string{""} // the runtime profile stores none
	}
	im := openEROFS(t, path)
	if _, err := im.Check(); err != nil {
		t.Errorf("%s: erofs Check: %v", path, err)
	}
	if err := sinktest.Compare(im, want, o); err != nil {
		t.Errorf("%s (%s) differs from overlay.Flatten: %v", path, profile, err)
	}
}

func readFile(t *testing.T, im *erofs.Image, p string) string {
	t.Helper()
	rc, err := im.Open(p)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// basic is an authn.Authenticator for pushing to the auth test registry.
type basic struct{ user, pass string }

func (b *basic) Authorization() (*authn.AuthConfig, error) {
	return &authn.AuthConfig{Username: b.user, Password: b.pass}, nil
}

// checkFixtureFacts states what fixtureLayers must flatten to, so the
// comparison with overlay.Flatten cannot pass by sharing a bug.
func checkFixtureFacts(t *testing.T, im *erofs.Image) {
	t.Helper()
	dir := func(p string, want ...string) {
		got, err := im.ReadDir(p)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ReadDir(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
	dir(".", "dev", "etc", "home", "opt", "usr", "var")
	dir("var/lib/app", "c") // opaque: a, b and sub hidden
	dir("opt", "new")       // old whited out
	dir("etc", "link", "motd", "passwd")
	if got := readFile(t, im, "etc/motd"); got != "new motd\n" {
		t.Errorf("etc/motd = %q", got)
	}
	for p, typ := range map[string]uint32{"etc/link": sink.TypeReg, "usr/bin": sink.TypeReg, "dev/null": sink.TypeChar, "dev/fifo": sink.TypeFifo, "home/u": sink.TypeDir} {
		if h, err := im.Lstat(p); err != nil || h.Type() != typ {
			t.Errorf("%s: %+v %v, want type %o", p, h, err, typ)
		}
	}
	if h, err := im.Lstat("etc"); err != nil || h.Mode&sink.ModePerm != 0o750 {
		t.Errorf("etc mode from the upper layer: %+v %v", h, err)
	}
	if h, err := im.Lstat("home/u/.profile"); err != nil || h.UID != 1000 || h.Mode&sink.ModePerm != 0o600 {
		t.Errorf("home/u/.profile: %+v %v", h, err)
	}
}

func openCacheAt(t *testing.T, dir string) *cache.Cache {
	t.Helper()
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
