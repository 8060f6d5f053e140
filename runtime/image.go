package runtime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/overlay"
)

// Image is an OCI image made ready for the Sentry: its layers flattened
// into one flat-plain EROFS file, and its configuration.
type Image struct {
	// RootfsPath is the absolute path of the EROFS rootfs.
	RootfsPath string
	// Config is the image's runtime configuration (Entrypoint, Cmd, Env,
	// WorkingDir, User).
	Config v1.Config
	// Digest names the image: the digest of its config blob.
	Digest string
}

// resolveImage turns an image reference into an EROFS rootfs and a config.
// Accepted forms: "oci:DIR" (an OCI image layout with one image, or
// "oci:DIR:REF" to pick the manifest annotated with that ref name),
// "docker-archive:TAR" (docker save output), or a bare path to either.
// Registry references are not resolved here (ErrUnsupported).
//
// Rootfs files are cached by config digest in cacheDir when it is usable,
// else written to scratchDir (removed with the episode).
//
// This is the one place that knows about image sources, so it can be
// swapped for package image when that lands.
func resolveImage(ref, cacheDir, scratchDir string) (*Image, error) {
	img, err := openImage(ref)
	if err != nil {
		return nil, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("image %s: config digest: %w", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", ref, err)
	}
	out := &Image{Config: cf.Config, Digest: cfgName.String()}

	dir := cacheDir
	if dir == "" || os.MkdirAll(dir, 0o755) != nil || !writable(dir) {
		dir = scratchDir
	}
	path, err := filepath.Abs(filepath.Join(dir, cfgName.Hex+".erofs"))
	if err != nil {
		return nil, err
	}
	out.RootfsPath = path
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return out, nil // published atomically, so present means complete
	}
	if err := buildRootfs(img, path, dir); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	return out, nil
}

// openImage opens the image named by ref.
func openImage(ref string) (v1.Image, error) {
	kind, path := "", ref
	switch {
	case strings.HasPrefix(ref, "oci:"):
		kind, path = "oci", strings.TrimPrefix(ref, "oci:")
	case strings.HasPrefix(ref, "docker-archive:"):
		kind, path = "docker-archive", strings.TrimPrefix(ref, "docker-archive:")
	}
	tag := ""
	if kind == "oci" {
		if i := strings.LastIndexByte(path, ':'); i > 0 {
			if _, err := os.Stat(path); err != nil {
				path, tag = path[:i], path[i+1:]
			}
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		if kind == "" && !strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, ".") {
			return nil, fmt.Errorf("image %q: registry references need package image (not landed yet); pass oci:DIR or docker-archive:TAR: %w", ref, ErrUnsupported)
		}
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	if kind == "" {
		kind = "docker-archive"
		if st.IsDir() {
			kind = "oci"
		}
	}
	if kind == "docker-archive" {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, fmt.Errorf("image %q: docker archive: %w", ref, err)
		}
		return img, nil
	}
	idx, err := layout.ImageIndexFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("image %q: OCI layout: %w", ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %q: OCI index: %w", ref, err)
	}
	var pick []v1.Descriptor
	for _, d := range im.Manifests {
		if tag != "" && d.Annotations["org.opencontainers.image.ref.name"] != tag {
			continue
		}
		if d.Platform != nil && (d.Platform.OS != "" && d.Platform.OS != "linux" || d.Platform.Architecture != "" && d.Platform.Architecture != goarch()) {
			continue
		}
		pick = append(pick, d)
	}
	switch {
	case len(pick) == 0:
		return nil, fmt.Errorf("image %q: no manifest for linux/%s%s in the layout", ref, goarch(), tagNote(tag))
	case len(pick) > 1:
		return nil, fmt.Errorf("image %q: %d manifests match; name one with oci:DIR:REF", ref, len(pick))
	}
	if pick[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("image %q: nested index: %w", ref, ErrUnsupported)
	}
	img, err := idx.Image(pick[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	return img, nil
}

func tagNote(tag string) string {
	if tag == "" {
		return ""
	}
	return " named " + tag
}

// buildRootfs flattens img's layers into a runtime-profile EROFS at path.
func buildRootfs(img v1.Image, path, tmpDir string) (err error) {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	readers := make([]io.Reader, 0, len(layers))
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		defer rc.Close()
		readers = append(readers, rc)
	}
	b := erofs.NewBuilder(erofs.Options{Profile: erofs.ProfileRuntime, Path: path, TempDir: tmpDir})
	defer b.Close()
	if err := overlay.Flatten(b, readers...); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	return b.Finish()
}

// writable reports whether the current user may create files in dir.
func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	return os.Remove(name) == nil || errors.Is(err, os.ErrNotExist)
}

func goarch() string { return goruntime.GOARCH }
