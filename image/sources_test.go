package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/image/imagetest"
)

func TestParseSource(t *testing.T) {
	abs, _ := filepath.Abs("img")
	for in, want := range map[string]string{
		"oci:img":                        "oci:" + abs,
		"oci:img:v1":                     "oci:" + abs + ":v1",
		"oci:/x/y:sha256:abc":            "oci:/x/y:sha256:abc",
		"docker-archive:img":             "docker-archive:" + abs,
		"docker-archive:img:app:v1":      "docker-archive:" + abs + ":app:v1",
		"localhost:5000/x:y":             "localhost:5000/x:y",
		"127.0.0.1:5000/a/b/c":           "127.0.0.1:5000/a/b/c:latest",
		"localhost:5000/x@sha256:" + h64: "localhost:5000/x@sha256:" + h64,
	} {
		s, err := ParseSource(in)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", in, err)
			continue
		}
		if s.String() != want {
			t.Errorf("ParseSource(%q) = %q, want %q", in, s, want)
		}
		if again, err := ParseSource(s.String()); err != nil || again.String() != s.String() {
			t.Errorf("canonical form %q does not round-trip: %v %v", s, again, err)
		}
	}
	for _, in := range []string{"", "oci:", "docker-archive:", "https://x/y", "a b", "x@sha256:short", "docker-archive:f:UP:x"} {
		if _, err := ParseSource(in); !errors.Is(err, ErrBadSource) {
			t.Errorf("ParseSource(%q): %v, want ErrBadSource", in, err)
		}
	}
}

const h64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestArchiveAndLayoutShareEntry writes one image as a docker save archive
// and as an OCI layout: both land on the same cache file.
func TestArchiveAndLayoutShareEntry(t *testing.T) {
	layers := fixtureLayers(t)
	img := fixtureImage(t, amd64, layers)
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "app.tar")
	tag, _ := name.NewTag("app:v1")
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	if err := imagetest.WriteLayout(lay, img, "v1"); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	a, err := Add(ctx, c, "docker-archive:"+tarPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := Add(ctx, c, "oci:"+lay, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != o.Digest || a.EROFS != o.EROFS || a.Config != o.Config || a.ConfigDigest != o.ConfigDigest {
		t.Errorf("archive %+v\nlayout %+v\nwant one entry", a, o)
	}
	if !a.Created || o.Created {
		t.Errorf("created: archive %v, layout %v; want true, false", a.Created, o.Created)
	}
	checkFlattened(t, a.EROFS, "runtime", layers)
	// Named forms reach the same image.
	for _, src := range []string{"docker-archive:" + tarPath + ":app:v1", "oci:" + lay + ":v1"} {
		r, err := Add(ctx, c, src, Options{})
		if err != nil || r.EROFS != a.EROFS {
			t.Errorf("%s: %+v %v", src, r, err)
		}
	}
	if l, _ := List(c); len(l) != 4 {
		t.Errorf("index has %d entries, want 4 sources", len(l))
	}
	objs, _ := os.ReadDir(filepath.Join(c.Dir(), "objects"))
	if len(objs) != 3 {
		t.Errorf("objects %v, want erofs, report and config", objs)
	}
	for _, src := range []string{"docker-archive:" + tarPath + ":other:v1", "oci:" + lay + ":v2", "oci:" + lay + ":sha256:" + h64, "oci:" + dir + "/none", "docker-archive:" + dir + "/none.tar"} {
		if _, err := Add(ctx, c, src, Options{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", src, err)
		}
	}
	if _, err := Add(ctx, c, "docker-archive:"+filepath.Join(lay, "index.json"), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("not an archive: %v, want ErrCorrupt", err)
	}
}

// TestLayoutIndexes resolves layouts holding several images: by name, by
// digest, and by platform when the entries carry one.
func TestLayoutIndexes(t *testing.T) {
	c := newCache(t)
	arm := v1.Platform{OS: "linux", Architecture: "arm64"}
	imgA := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", "a"))})
	imgB := fixtureImage(t, arm, [][]byte{mustTar(t, imagetest.File("who", "b"))})
	named := t.TempDir()
	p, err := layout.Write(named, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for n, img := range map[string]v1.Image{"a": imgA, "b": imgB} {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: "example/app:" + n})); err != nil {
			t.Fatal(err)
		}
	}
	dB, _ := imgB.Digest()
	for src, want := range map[string]string{"oci:" + named + ":a": "a", "oci:" + named + ":example/app:b": "b", "oci:" + named + ":" + dB.String(): "b"} {
		r, err := Add(ctx, c, src, Options{})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got := readFile(t, openEROFS(t, r.EROFS), "who"); got != want {
			t.Errorf("%s gave image %q, want %q", src, got, want)
		}
	}
	if _, err := Add(ctx, c, "oci:"+named, Options{}); !errors.Is(err, ErrBadSource) {
		t.Errorf("ambiguous layout: %v, want ErrBadSource", err)
	}
	// A layout whose index.json is itself a multi-platform index.
	multi := t.TempDir()
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: imgA, Descriptor: v1.Descriptor{Platform: &amd64}},
		mutate.IndexAddendum{Add: imgB, Descriptor: v1.Descriptor{Platform: &arm}})
	if _, err := layout.Write(multi, idx); err != nil {
		t.Fatal(err)
	}
	for plat, want := range map[string]string{"linux/amd64": "a", "linux/arm64": "b"} {
		r, err := Add(ctx, c, "oci:"+multi, Options{Platform: plat})
		if err != nil {
			t.Fatalf("%s: %v", plat, err)
		}
		if got := readFile(t, openEROFS(t, r.EROFS), "who"); got != want {
			t.Errorf("%s gave image %q, want %q", plat, got, want)
		}
	}
	var pe *PlatformError
	if _, err := Add(ctx, c, "oci:"+multi, Options{Platform: "linux/riscv64"}); !errors.As(err, &pe) || len(pe.Available) != 2 {
		t.Errorf("linux/riscv64: %v", err)
	}
}

// TestCorruptLayer: an image whose configuration names a wrong diffID is
// refused and leaves no EROFS file.
func TestCorruptLayer(t *testing.T) {
	img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("x", "x"))})
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: h64}
	bad, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	lay := t.TempDir()
	if err := imagetest.WriteLayout(lay, bad, ""); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	if _, err := Add(ctx, c, "oci:"+lay, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong diffID: %v, want ErrCorrupt", err)
	}
	objs, _ := os.ReadDir(filepath.Join(c.Dir(), "objects"))
	for _, o := range objs {
		if filepath.Ext(o.Name()) == ".erofs" || o.Name()[0] == '.' {
			t.Errorf("left in the cache: %s", o.Name())
		}
	}
	// A configuration blob that does not match its digest.
	lay2 := t.TempDir()
	if err := imagetest.WriteLayout(lay2, img, ""); err != nil {
		t.Fatal(err)
	}
	cfgName, _ := img.ConfigName()
	if err := os.WriteFile(filepath.Join(lay2, "blobs", "sha256", cfgName.Hex), []byte(`{"rootfs":{"type":"layers","diff_ids":[]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(ctx, c, "oci:"+lay2, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tampered config: %v, want ErrCorrupt", err)
	}
	// A layer blob of a layout changed on disk (go-containerregistry does
	// not verify layout blobs; Add does).
	lay3 := t.TempDir()
	if err := imagetest.WriteLayout(lay3, img, ""); err != nil {
		t.Fatal(err)
	}
	ls, _ := img.Layers()
	ld, _ := ls[0].Digest()
	blob := filepath.Join(lay3, "blobs", "sha256", ld.Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 1 // in the gzip trailer: the tar itself still reads
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(ctx, c, "oci:"+lay3, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tampered layer blob: %v, want ErrCorrupt", err)
	}
}

// TestCanceled: a canceled context stops an add before anything is
// published.
func TestCanceled(t *testing.T) {
	lay := t.TempDir()
	if err := imagetest.WriteLayout(lay, fixtureImage(t, amd64, fixtureLayers(t)), ""); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Add(cctx, c, "oci:"+lay, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled add: %v", err)
	}
	if l, _ := List(c); len(l) != 0 {
		t.Errorf("indexed %v", l)
	}
}

// TestLayoutNestedIndexes: an index of an index of … an image resolves
// while the nesting stays within maxIndexDepth, and a deeper one (a
// crafted layout that would make resolution recurse without end if it
// pointed at itself) is refused as unsupported.
func TestLayoutNestedIndexes(t *testing.T) {
	c := newCache(t)
	img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", "deep"))})
	nest := func(levels int) string {
		var idx v1.ImageIndex = mutate.AppendManifests(empty.Index,
			mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &amd64}})
		for i := 1; i < levels; i++ {
			idx = mutate.AppendManifests(empty.Index,
				mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{Platform: &amd64}})
		}
		dir := t.TempDir()
		if _, err := layout.Write(dir, idx); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// index.json is level 0; levels 1..maxIndexDepth below it resolve.
	r, err := Add(ctx, c, "oci:"+nest(maxIndexDepth+1), Options{Platform: "linux/amd64"})
	if err != nil {
		t.Fatalf("%d nested indexes: %v", maxIndexDepth+1, err)
	}
	if got := readFile(t, openEROFS(t, r.EROFS), "who"); got != "deep" {
		t.Errorf("nested indexes gave %q", got)
	}
	if _, err := Add(ctx, c, "oci:"+nest(maxIndexDepth+2), Options{Platform: "linux/amd64"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("%d nested indexes: %v, want ErrUnsupported", maxIndexDepth+2, err)
	}
}
