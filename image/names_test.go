package image

import (
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image/imagetest"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"docker:dind":                         "index.docker.io/library/docker:dind",
		"docker.io/library/docker:dind":       "index.docker.io/library/docker:dind",
		"index.docker.io/library/docker:dind": "index.docker.io/library/docker:dind",
		"busybox":                             "index.docker.io/library/busybox:latest",
		"team/app:v1":                         "index.docker.io/team/app:v1",
		"localhost:5000/a":                    "localhost:5000/a:latest",
		"registry.example:5000/team/app:v3":   "registry.example:5000/team/app:v3",
	} {
		if got, err := NormalizeName(in); err != nil || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "oci:/srv/dind", "docker-archive:a.tar", "busybox@sha256:" + strings.Repeat("a", 64),
		"Docker:dind", "http://registry.example/a:b", "a:b:c"} {
		if got, err := NormalizeName(in); !errors.Is(err, ErrBadSource) || !strings.Contains(err.Error(), "NAME[:TAG]") {
			t.Errorf("NormalizeName(%q) = %q, %v; want an ErrBadSource that says NAME[:TAG]", in, got, err)
		}
	}
}

func FuzzNormalizeName(f *testing.F) {
	for _, s := range []string{"docker:dind", "localhost:5000/a", "oci:/x", "a@sha256:x", "", "A", "a/b/c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeName(s)
		if err != nil {
			return
		}
		if again, err := NormalizeName(got); err != nil || again != got {
			t.Fatalf("%q → %q does not normalise to itself: %q %v", s, got, again, err)
		}
		if again, err := NormalizeName(FamiliarName(got)); err != nil || again != got {
			t.Fatalf("%q → %q: its familiar form %q normalises to %q %v", s, got, FamiliarName(got), again, err)
		}
	})
}

func TestFamiliarName(t *testing.T) {
	for in, want := range map[string]string{
		"index.docker.io/library/docker:dind": "docker:dind",
		"docker.io/library/python:3":          "python:3",
		"index.docker.io/team/app:v1":         "team/app:v1",
		"index.docker.io/library/a/b:v1":      "library/a/b:v1",
		"localhost:5000/library/x:y":          "localhost:5000/library/x:y",
		"oci:/srv/dind":                       "oci:/srv/dind",
		"index.docker.io/library/oci:latest":  "docker.io/library/oci:latest", // "oci:latest" is a layout
	} {
		if got := FamiliarName(in); got != want {
			t.Errorf("FamiliarName(%q) = %q, want %q", in, got, want)
		}
	}
}

// layoutSource writes a one-layer image holding /who (body) as an OCI
// layout and returns its source.
func layoutSource(t *testing.T, body string) string {
	t.Helper()
	lay := t.TempDir()
	img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", body))})
	if err := imagetest.WriteLayout(lay, img, "v1"); err != nil {
		t.Fatal(err)
	}
	return "oci:" + lay
}

// TestTagLookupRemove: a name recorded by Add (Options.Tags) or Tag
// resolves through Lookup in every spelling Docker accepts, points at the
// image's own files, keeps them from GC after its source is removed, and
// goes with image rm.
func TestTagLookupRemove(t *testing.T) {
	c := newCache(t)
	src := layoutSource(t, "a")
	res, err := Add(ctx, c, src, Options{Tags: []string{"docker:dind"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{"docker:dind", "docker.io/library/docker:dind", "index.docker.io/library/docker:dind"} {
		got, err := Lookup(c, spelling, "")
		if err != nil {
			t.Fatalf("Lookup(%s): %v", spelling, err)
		}
		if got.EROFS != res.EROFS || got.Config != res.Config || got.Digest != res.Digest || got.Source != res.Ref || got.Ref != "index.docker.io/library/docker:dind" {
			t.Errorf("Lookup(%s) = %+v, want the files of %+v with source %s", spelling, got, res, res.Ref)
		}
	}
	if _, err := Lookup(c, "docker:dind", "full"); !errors.Is(err, ErrNotCached) || !errors.Is(err, ErrNotFound) {
		t.Errorf("a profile the name was not given in: %v", err)
	}

	// By digest, by source, by name; a name of a name records the source.
	for _, from := range []string{res.Digest, src, "docker:dind"} {
		tagged, err := Tag(c, from, "registry.example:5000/team/app:v2")
		if err != nil || len(tagged) != 1 || tagged[0].Source != res.Ref || tagged[0].Digest != res.Digest {
			t.Fatalf("Tag(%s): %+v %v", from, tagged, err)
		}
	}
	if _, err := Tag(c, "sha256:"+strings.Repeat("0", 64), "x:y"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "gvx-vol image add --tag x:y") {
		t.Errorf("Tag of an unknown image: %v", err)
	}
	if _, err := Tag(c, src, "oci:/x"); !errors.Is(err, ErrBadSource) {
		t.Errorf("Tag to a transport: %v", err)
	}
	list, err := List(c)
	if err != nil || len(list) != 3 {
		t.Fatalf("List: %d entries, %v", len(list), err)
	}

	// The source goes; its names keep the files.
	if _, err := Remove(c, src, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := GC(c); err != nil || len(r.Removed) != 0 {
		t.Fatalf("GC removed %v (%v) while names still hold the image", r.Removed, err)
	}
	if _, err := Lookup(c, "docker:dind", ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"docker:dind", "registry.example:5000/team/app:v2"} {
		if _, err := Remove(c, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := GC(c); err != nil || len(r.Removed) != 3 {
		t.Fatalf("GC after the last name went: %v %v", r, err)
	}
	if _, err := Lookup(c, "docker:dind", ""); !errors.Is(err, ErrNotCached) {
		t.Errorf("Lookup of a removed name: %v", err)
	}
}

// TestLookupRefusesDamage: an entry whose files are gone is not cached;
// one whose metadata contradicts its key is corrupt.
func TestLookupRefusesDamage(t *testing.T) {
	c := newCache(t)
	res, err := Add(ctx, c, layoutSource(t, "a"), Options{Tags: []string{"a:v1", "b:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(res.EROFS); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(c, "a:v1", ""); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("files gone: %v", err)
	}
	err = c.Update(func(ix *cache.Index) error {
		e := ix.Entries["runtime index.docker.io/library/b:v1"]
		e.Meta = []byte(strings.Replace(string(e.Meta), "library/b:v1", "library/c:v1", 1))
		ix.Entries["runtime index.docker.io/library/b:v1"] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(c, "b:v1", ""); !errors.Is(err, cache.ErrCorrupt) {
		t.Errorf("metadata of another name: %v", err)
	}
	if _, err := Lookup(c, "oci:/x", ""); !errors.Is(err, ErrBadSource) {
		t.Errorf("Lookup of a layout: %v", err)
	}
}

// recorder is a transport that fails every request and counts them: a
// test that uses it and sees no request proves nothing went to the network.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return nil, errors.New("recorder: no network in this test")
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.urls...)
}

// TestGetPolicies: missing and never take a known name from the cache
// with no request at all; never refuses an unknown one, naming the fix;
// missing and always go to the registry.
func TestGetPolicies(t *testing.T) {
	hermetic(t)
	c := newCache(t)
	res, err := Add(ctx, c, layoutSource(t, "a"), Options{Tags: []string{"docker:dind"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []PullPolicy{"", PullMissing, PullNever} {
		rec := &recorder{}
		got, err := Get(ctx, c, "docker:dind", p, Options{Transport: rec})
		if err != nil || got.EROFS != res.EROFS {
			t.Errorf("Get(docker:dind, %q): %+v %v", p, got, err)
		}
		if n := rec.requests(); len(n) != 0 {
			t.Errorf("Get(docker:dind, %q) sent %v", p, n)
		}
	}
	rec := &recorder{}
	_, err = Get(ctx, c, "docker:rootless", PullNever, Options{Transport: rec})
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "gvx-vol image add --tag docker:rootless SOURCE") || !strings.Contains(err.Error(), c.Dir()) {
		t.Errorf("never, unknown: %v", err)
	}
	if n := rec.requests(); len(n) != 0 {
		t.Errorf("never sent %v", n)
	}
	if _, err := Get(ctx, c, "docker:rootless", PullMissing, Options{Transport: rec}); err == nil || len(rec.requests()) == 0 {
		t.Errorf("missing, unknown: %v after %d requests (want a fetch that fails)", err, len(rec.requests()))
	}
	rec = &recorder{}
	if _, err := Get(ctx, c, "docker:dind", PullAlways, Options{Transport: rec}); err == nil || len(rec.requests()) == 0 || !strings.Contains(err.Error(), "local name") {
		t.Errorf("always, local name: %v after %d requests (want a fetch that fails, naming the local name)", err, len(rec.requests()))
	}
	if _, err := Get(ctx, c, "docker:dind", "sometimes", Options{}); !errors.Is(err, ErrBadSource) {
		t.Errorf("bad policy: %v", err)
	}
	// An explicit platform the cached image is not: never refuses it.
	if _, err := Get(ctx, c, "docker:dind", PullNever, Options{Platform: "linux/arm64", Transport: rec}); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "linux/amd64, not linux/arm64") {
		t.Errorf("never, other platform: %v", err)
	}
}

// TestGetAlwaysReplacesName: a pull of a name from its registry replaces
// the local image under it, as docker pull does; missing then uses the
// pulled one.
func TestGetAlwaysReplacesName(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, nil)
	ref := host + "/team/app:v1"
	pushed := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", "registry"))})
	push(t, ref, pushed)
	c := newCache(t)
	local, err := Add(ctx, c, layoutSource(t, "local"), Options{Tags: []string{ref}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Get(ctx, c, ref, PullMissing, Options{}); err != nil || got.Digest != local.Digest {
		t.Fatalf("missing: %+v %v, want the local image", got, err)
	}
	pulled, err := Get(ctx, c, ref, PullAlways, Options{})
	if err != nil || pulled.Digest == local.Digest || !pulled.Created {
		t.Fatalf("always: %+v %v, want the registry's image", pulled, err)
	}
	got, err := Get(ctx, c, ref, PullNever, Options{})
	if err != nil || got.Digest != pulled.Digest || got.Source != "" {
		t.Errorf("never after the pull: %+v %v, want the pulled entry", got, err)
	}
}

// TestResolve: the index's digest for a multi-platform image, the same
// *PlatformError as Add for a platform it lacks, and plain HTTP for a
// registry listed as insecure.
func TestResolve(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, nil)
	ref := host + "/team/multi:v1"
	arm := v1.Platform{OS: "linux", Architecture: "arm64"}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("who", "amd64"))}), Descriptor: v1.Descriptor{Platform: &amd64}},
		mutate.IndexAddendum{Add: fixtureImage(t, arm, [][]byte{mustTar(t, imagetest.File("who", "arm64"))}), Descriptor: v1.Descriptor{Platform: &arm}})
	r0, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r0, idx); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	r, err := Resolve(ctx, ref, Options{Platform: "linux/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := r.Image.ConfigFile()
	if r.Digest != want || cf.Architecture != "arm64" || r.Source.Ref != ref {
		t.Errorf("Resolve: digest %s (want the index's %s), %s", r.Digest, want, cf.Architecture)
	}
	var pe *PlatformError
	if _, err := Resolve(ctx, ref, Options{Platform: "linux/s390x"}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "--platform") {
		t.Errorf("missing platform: %v", err)
	}
	// go-containerregistry tries HTTPS first and falls back to plain HTTP
	// only for an insecure registry.
	for _, c := range []struct {
		insecure  []string
		plainHTTP bool
	}{{nil, false}, {[]string{"registry.example:5000"}, true}, {[]string{"registry.example"}, false}} {
		rec := &recorder{}
		_, _ = Resolve(ctx, "registry.example:5000/a:b", Options{InsecureRegistries: c.insecure, Transport: rec})
		reqs := rec.requests()
		plain := slices.ContainsFunc(reqs, func(u string) bool { return strings.HasPrefix(u, "http://registry.example:5000/") })
		if len(reqs) == 0 || plain != c.plainHTTP {
			t.Errorf("insecure %v: requests %v, want plain HTTP %v", c.insecure, reqs, c.plainHTTP)
		}
	}
}
