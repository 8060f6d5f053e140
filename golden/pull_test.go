package golden

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/image"
)

// testRegistry is go-containerregistry's registry on loopback; it returns
// its host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// push writes img to ref in the test registry.
func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// withPlatform sets the configuration's os/architecture.
func withPlatform(t *testing.T, img v1.Image, os, arch string) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = os, arch
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func randomImage(t *testing.T, layers int) v1.Image {
	t.Helper()
	img, err := random.Image(4096, int64(layers))
	if err != nil {
		t.Fatal(err)
	}
	return withPlatform(t, img, "linux", "amd64")
}

func testPuller(arch string, log io.Writer) *puller {
	return &puller{opts: image.Options{Platform: "linux/" + arch}, log: log}
}

func pullOne(t *testing.T, pl *puller, ref string) (*pulled, error) {
	t.Helper()
	spec, err := parsePull(ref)
	if err != nil {
		t.Fatal(err)
	}
	return pl.pull(context.Background(), spec, t.TempDir(), 0)
}

// checkArchive: the archive holds img under tag, as the daemon will load it.
func checkArchive(t *testing.T, p *pulled, tag string, img v1.Image) {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p.path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != tag {
		t.Fatalf("archive manifest %+v, want one image tagged %s", m, tag)
	}
	got, err := tarball.ImageFromPath(p.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := got.ConfigName()
	wid, _ := img.ConfigName()
	if gid != wid || p.id != wid {
		t.Errorf("config digest: archive %s, reported %s, pushed %s", gid, p.id, wid)
	}
	gl, _ := got.Layers()
	wl, _ := img.Layers()
	if len(gl) != len(wl) || p.layers != len(wl) {
		t.Fatalf("%d layers in the archive, %d reported, %d pushed", len(gl), p.layers, len(wl))
	}
	for i := range wl {
		g, _ := gl[i].Digest()
		w, _ := wl[i].Digest()
		if g != w {
			t.Errorf("layer %d: %s, pushed %s", i, g, w)
		}
	}
}

// TestPull: a tagged image from the in-process registry on loopback (plain
// HTTP without a flag) becomes a docker-archive tagged with the reference;
// the reported digest is the registry's manifest digest. A REPO:TAG@digest
// reference pulls by digest and tags REPO:TAG.
func TestPull(t *testing.T) {
	reg := testRegistry(t)
	img := randomImage(t, 3)
	ref := reg + "/gvx/random:v1"
	push(t, ref, img)
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	var logb bytes.Buffer
	p, err := pullOne(t, testPuller("amd64", &logb), ref)
	if err != nil {
		t.Fatal(err)
	}
	if p.digest != want {
		t.Errorf("digest %s, want the manifest's %s", p.digest, want)
	}
	checkArchive(t, p, ref, img)
	if got := logb.String(); !strings.HasPrefix(got, "pull "+ref+": 3 layers, ") || !strings.HasSuffix(got, " MiB\n") {
		t.Errorf("progress %q", got)
	}
	if fi, err := os.Stat(p.path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("archive mode: %v %v", fi.Mode(), err)
	}

	pinned := ref + "@" + want.String()
	p, err = pullOne(t, testPuller("amd64", io.Discard), pinned)
	if err != nil {
		t.Fatal(err)
	}
	if p.digest != want {
		t.Errorf("pinned digest %s, want %s", p.digest, want)
	}
	checkArchive(t, p, ref, img)
}

// TestPullIndex: from a multi-platform index the host's platform is
// picked, the digest is the index's (what `docker pull` reports), and a
// platform the index lacks is an error that lists what it has.
func TestPullIndex(t *testing.T) {
	reg := testRegistry(t)
	amd, arm := randomImage(t, 1), withPlatform(t, randomImage(t, 2), "linux", "arm64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: randomImage(t, 1), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
	)
	ref := reg + "/gvx/multi:latest"
	r, _ := name.ParseReference(ref)
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	for arch, img := range map[string]v1.Image{"amd64": amd, "arm64": arm} {
		p, err := pullOne(t, testPuller(arch, io.Discard), ref)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if p.digest != want {
			t.Errorf("%s: digest %s, want the index's %s", arch, p.digest, want)
		}
		checkArchive(t, p, ref, img)
	}
	// The error is package image's, as gvx-vol image add reports it.
	_, err := pullOne(t, testPuller("s390x", io.Discard), ref)
	var pe *image.PlatformError
	if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "pull "+ref+": ") || strings.Join(pe.Available, ",") != "linux/arm64,linux/amd64" {
		t.Errorf("missing platform: %v", err)
	}
}

// TestPullErrors: each failure names the reference and says what is wrong;
// nothing is left in the directory.
func TestPullErrors(t *testing.T) {
	reg := testRegistry(t)
	push(t, reg+"/gvx/arm:v1", withPlatform(t, randomImage(t, 1), "linux", "arm64"))
	// A closed port on loopback: connection refused.
	dead := httptest.NewServer(nil)
	deadHost := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	cases := []struct{ ref, want string }{
		{reg + "/gvx/arm:v1", "pull " + reg + "/gvx/arm:v1: image: " + reg + "/gvx/arm:v1 has no image for platform linux/amd64 (available: linux/arm64; choose one with --platform)"},
		{reg + "/gvx/none:v1", "pull " + reg + "/gvx/none:v1: image: not found: "},
		{deadHost + "/gvx/x:v1", "pull " + deadHost + "/gvx/x:v1: "},
	}
	for _, c := range cases {
		dir := t.TempDir()
		spec, err := parsePull(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = testPuller("amd64", io.Discard).pull(context.Background(), spec, dir, 0)
		t.Logf("%s: %v", c.ref, err)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.ref, err, c.want)
		}
		if left, _ := os.ReadDir(dir); len(left) > 1 { // pull-0.tar may remain; pullAll removes the directory
			t.Errorf("%s: left %v", c.ref, left)
		}
	}
	for _, c := range []struct{ ref, want string }{
		{"Bad:Ref!", `pull "Bad:Ref!": not an image reference`},
		{"busybox@sha256:" + strings.Repeat("a", 64), "name a tag with the digest"},
		{"busybox@sha256:abc", "not an image reference"},
		{"oci:/srv/x", "not an image reference"},
	} {
		if _, err := parsePull(c.ref); !errors.Is(err, ErrBadOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.ref, err, c.want)
		}
	}
}

// TestPullAllCleansUp: pullAll makes its directory next to OUT and
// removes it when a pull fails.
func TestPullAllCleansUp(t *testing.T) {
	reg := testRegistry(t)
	push(t, reg+"/gvx/ok:v1", randomImage(t, 1))
	dir := t.TempDir()
	out := filepath.Join(dir, "golden.ext4")
	var specs []*pullSpec
	for _, r := range []string{reg + "/gvx/ok:v1", reg + "/gvx/missing:v1"} {
		s, err := parsePull(r)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	if _, _, err := testPuller("amd64", io.Discard).pullAll(context.Background(), specs, out); err == nil || !strings.Contains(err.Error(), "missing:v1") {
		t.Fatalf("pullAll: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	pd, ps, err := testPuller("amd64", io.Discard).pullAll(context.Background(), specs[:1], out)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(pd) != dir || len(ps) != 1 || filepath.Dir(ps[0].path) != pd {
		t.Errorf("directory %s, archives %+v", pd, ps)
	}
	if fi, err := os.Stat(pd); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pull directory: %v %v", fi, err)
	}
}

// TestFamiliar: the names `docker images` lists for what docker load
// reads from a tag.
func TestFamiliar(t *testing.T) {
	for in, want := range map[string]string{
		"python:3.11-slim":                     "python:3.11-slim",
		"docker.io/library/python":             "python:latest",
		"index.docker.io/library/python:3":     "python:3",
		"docker.io/team/tool:v1":               "team/tool:v1",
		"docker.io/library/a/b:v1":             "library/a/b:v1",
		"127.0.0.1:5000/gvx/hello:v1":          "127.0.0.1:5000/gvx/hello:v1",
		"quay.io/library/x:y":                  "quay.io/library/x:y",
		"registry.example:5000/library/python": "registry.example:5000/library/python:latest",
	} {
		tag, err := name.NewTag(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := familiar(tag); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

func TestAnnotate(t *testing.T) {
	reg := "127.0.0.1:5000"
	spec, _ := parsePull(reg + "/gvx/hello:v1")
	id := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("1", 64)}
	dg := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("2", 64)}
	images := []Image{
		{Ref: "hello:latest", ID: id.String()}, // a --load of the same image under another name
		{Ref: reg + "/gvx/hello:v1", ID: id.String()},
	}
	ps := []*pulled{{spec: spec, id: id, digest: dg}}
	if err := annotate(images, ps); err != nil {
		t.Fatal(err)
	}
	want := []Image{{Ref: "hello:latest", ID: id.String()}, {Ref: reg + "/gvx/hello:v1", ID: id.String(), Digest: dg.String()}}
	if images[0] != want[0] || images[1] != want[1] {
		t.Errorf("%+v, want %+v", images, want)
	}
	if err := annotate(images[:1], ps); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Errorf("missing pull: %v", err)
	}
}

// BenchmarkPull: a 64 MiB image (4 random layers) from the in-process
// registry on loopback into a docker-archive; B/op shows the layers are
// streamed, not held in memory.
func BenchmarkPull(b *testing.B) {
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer s.Close()
	img, err := random.Image(16<<20, 4)
	if err != nil {
		b.Fatal(err)
	}
	ref := strings.TrimPrefix(s.URL, "http://") + "/bench/img:v1"
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img); err != nil {
		b.Fatal(err)
	}
	pl := &puller{log: io.Discard} // a single-platform image: taken as it is
	spec, err := parsePull(ref)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(4 * 16 << 20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p, err := pl.pull(context.Background(), spec, dir, i)
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(p.path)
	}
}

// FuzzParsePull: any --pull string parses or fails with an error naming
// it; never a panic; an accepted one always has a tag docker can list.
func FuzzParsePull(f *testing.F) {
	for _, s := range []string{"python:3.11-slim", "127.0.0.1:5000/a/b:c", "a:b@sha256:" + strings.Repeat("0", 64), "a@sha256:x", "Bad:Ref!", "", "docker.io/library/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePull(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrBadOption.Error()+": pull ") {
				t.Fatalf("error without the flag: %v", err)
			}
			return
		}
		if fam := familiar(p.tag); fam == "" || !strings.Contains(fam, ":") || p.given != s {
			t.Fatalf("%q: tag %q given %q", s, fam, p.given)
		}
	})
}
