package image

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"z.gfire.dev/gvx/image/imagetest"
)

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// TestRegistryPull pulls a three-layer image over the registry protocol
// and checks the flattened EROFS, in both profiles, against overlay.Flatten
// of the same layers.
func TestRegistryPull(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, nil)
	layers := fixtureLayers(t)
	ref := host + "/team/app:v1"
	push(t, ref, fixtureImage(t, amd64, layers))
	c := newCache(t)
	for _, prof := range []string{"full", "runtime"} {
		t.Run(prof, func(t *testing.T) {
			var done, total int64
			res, err := Add(ctx, c, ref, Options{Profile: prof, Platform: "linux/amd64", Progress: func(d, tot int64) { done, total = d, tot }})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Created || res.Layers != 3 || res.Profile != prof || res.Platform != "linux/amd64" || res.Size == 0 {
				t.Errorf("result %+v", res)
			}
			if total == 0 || done != total {
				t.Errorf("progress ended at %d of %d bytes", done, total)
			}
			checkFlattened(t, res.EROFS, prof, layers)
			checkFixtureFacts(t, openEROFS(t, res.EROFS))
			// The runtime profile says what it dropped: the xattr on home/u.
			if prof == "runtime" && (res.Dropped != 1 || len(res.DroppedXattrs) != 1) {
				t.Errorf("runtime profile: dropped %d %v, want the one xattr", res.Dropped, res.DroppedXattrs)
			}
			if prof == "full" && res.Dropped != 0 {
				t.Errorf("full profile dropped %v", res.DroppedXattrs)
			}
			cfg, err := ReadConfig(res.Config)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Env, fixtureConfig.Env) || !slices.Equal(cfg.Entrypoint, fixtureConfig.Entrypoint) ||
				!slices.Equal(cfg.Cmd, fixtureConfig.Cmd) || cfg.WorkingDir != "/home/u" || cfg.User != "1000:1000" ||
				!slices.Equal(cfg.ExposedPorts, []string{"53/udp", "8080/tcp"}) || len(cfg.DiffIDs) != 3 ||
				cfg.Digest != res.ConfigDigest || cfg.Platform != "linux/amd64" {
				t.Errorf("config %+v", cfg)
			}
			// A second add reuses the entry without building.
			again, err := Add(ctx, c, ref, Options{Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			if again.Created || again.EROFS != res.EROFS || again.Digest != res.Digest || again.Dropped != res.Dropped {
				t.Errorf("second add %+v, first %+v", again, res)
			}
		})
	}
	list, err := List(c)
	if err != nil || len(list) != 2 || list[0].Profile != "full" || list[1].Profile != "runtime" || list[0].Digest == list[1].Digest {
		t.Errorf("List: %v %v", list, err)
	}
}

// TestRegistryMultiPlatform pushes an index with different linux/amd64 and
// linux/arm64 images: the asked-for one lands, and an absent platform
// lists what there is.
func TestRegistryMultiPlatform(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, nil)
	var adds []mutate.IndexAddendum
	for _, arch := range []string{"amd64", "arm64"} {
		p := v1.Platform{OS: "linux", Architecture: arch}
		if arch == "arm64" {
			p.Variant = "v8"
		}
		img := fixtureImage(t, p, [][]byte{mustTar(t, imagetest.File("arch", arch))})
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	// An attestation-like entry that must be skipped and not listed.
	att := fixtureImage(t, v1.Platform{OS: "unknown", Architecture: "unknown"}, [][]byte{mustTar(t, imagetest.File("att", "x"))})
	adds = append(adds, mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}})
	idx := mutate.AppendManifests(empty.Index, adds...)
	ref := host + "/multi:latest"
	r, _ := name.ParseReference(ref)
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	digests := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		res, err := Add(ctx, c, ref, Options{Platform: "linux/" + arch})
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if got := readFile(t, openEROFS(t, res.EROFS), "arch"); got != arch {
			t.Errorf("--platform linux/%s landed the %s image", arch, got)
		}
		if res.Platform != platformString(&v1.Platform{OS: "linux", Architecture: arch, Variant: map[string]string{"arm64": "v8"}[arch]}) {
			t.Errorf("platform %q", res.Platform)
		}
		digests[arch] = res.Digest
	}
	if digests["amd64"] == digests["arm64"] {
		t.Error("both platforms got one cache entry")
	}
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		res, err := Add(ctx, c, ref, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != digests[runtime.GOARCH] || res.Created {
			t.Errorf("default platform: %+v, want the %s entry", res, runtime.GOARCH)
		}
	}
	_, err := Add(ctx, c, ref, Options{Platform: "linux/s390x"})
	var pe *PlatformError
	if !errors.As(err, &pe) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("linux/s390x: %v, want a PlatformError", err)
	}
	if !slices.Equal(pe.Available, []string{"linux/amd64", "linux/arm64/v8"}) || pe.Want != "linux/s390x" {
		t.Errorf("PlatformError %+v", pe)
	}
	// A single-platform image refuses an explicit other platform.
	push(t, host+"/single:v1", fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("x", "x"))}))
	if _, err := Add(ctx, c, host+"/single:v1", Options{Platform: "linux/arm64"}); !errors.As(err, &pe) {
		t.Errorf("single amd64 image as linux/arm64: %v", err)
	}
}

func TestRegistryErrors(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, nil)
	push(t, host+"/there:v1", fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("x", "x"))}))
	c := newCache(t)
	for _, ref := range []string{host + "/there:v2", host + "/absent:v1", host + "/there@sha256:" + fmt.Sprintf("%064x", 1)} {
		if _, err := Add(ctx, c, ref, Options{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", ref, err)
		}
	}
	for _, ref := range []string{"", "http://x/y", "UPPER/case", "oci:", "docker-archive:x.tar:bad tag"} {
		if _, err := Add(ctx, c, ref, Options{}); !errors.Is(err, ErrBadSource) {
			t.Errorf("%q: %v, want ErrBadSource", ref, err)
		}
	}
	if _, err := Add(ctx, c, host+"/there:v1", Options{Platform: "linux"}); !errors.Is(err, ErrBadSource) {
		t.Errorf("bad platform: %v", err)
	}
	if _, err := Add(ctx, c, host+"/there:v1", Options{Profile: "tiny"}); !errors.Is(err, ErrBadSource) {
		t.Errorf("bad profile: %v", err)
	}
	// Nothing half-made was indexed or left behind.
	if l, _ := List(c); len(l) != 0 {
		t.Errorf("failed adds indexed %v", l)
	}
}

// TestRegistryAuth puts the registry behind HTTP basic auth: without
// credentials Add reports ErrAuth; with them in a docker config.json
// (found through $DOCKER_CONFIG by the default keychain) it pulls.
func TestRegistryAuth(t *testing.T) {
	hermetic(t)
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "gvx" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := host + "/private:v1"
	img := fixtureImage(t, amd64, [][]byte{mustTar(t, imagetest.File("secret", "s"))})
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img, remote.WithAuth(&basic{"gvx", "s3cret"})); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	if _, err := Add(ctx, c, ref, Options{}); !errors.Is(err, ErrAuth) {
		t.Fatalf("no credentials: %v, want ErrAuth", err)
	}
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("gvx:s3cret"))
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfgDir)
	res, err := Add(ctx, c, ref, Options{})
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	if got := readFile(t, openEROFS(t, res.EROFS), "secret"); got != "s" {
		t.Errorf("secret = %q", got)
	}
}

// TestRegistryTamperedBlob: a registry serving a layer blob that does not
// match its digest gets the add refused, and nothing lands in the cache.
func TestRegistryTamperedBlob(t *testing.T) {
	hermetic(t)
	var layerDigest string
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || layerDigest == "" || !strings.HasSuffix(r.URL.Path, "/blobs/"+layerDigest) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			body[len(body)/2] ^= 0x55
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	})
	img := fixtureImage(t, amd64, fixtureLayers(t))
	push(t, host+"/tampered:v1", img)
	ls, _ := img.Layers()
	d, _ := ls[1].Digest()
	layerDigest = d.String()
	c := newCache(t)
	if _, err := Add(ctx, c, host+"/tampered:v1", Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered layer blob: %v, want ErrCorrupt", err)
	} else {
		t.Logf("refused: %v", err)
	}
	objs, _ := os.ReadDir(filepath.Join(c.Dir(), "objects"))
	for _, o := range objs {
		if strings.HasSuffix(o.Name(), ".erofs") || strings.HasPrefix(o.Name(), ".") {
			t.Errorf("left in the cache: %s", o.Name())
		}
	}
	if l, _ := List(c); len(l) != 0 {
		t.Errorf("indexed: %v", l)
	}
}
