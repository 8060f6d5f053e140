package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refNameAnnotation names an image inside an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// maxIndexDepth bounds indexes nested in indexes.
const maxIndexDepth = 4

// resolver is the one place a source is turned into an image for a
// platform: Add and Resolve (and so gvx-vol image add, rungv and
// build-golden's pulls) all go through it.
type resolver struct {
	src      *Source
	want     v1.Platform
	explicit bool // want came from the caller, not DefaultPlatform
	keychain authn.Keychain
	rt       http.RoundTripper
	digest   v1.Hash // what the registry named: the manifest or index digest
}

// newResolver parses src and o's platform, credentials and registries.
func newResolver(src string, o *Options) (*resolver, error) {
	s, err := ParseSource(src)
	if err != nil {
		return nil, err
	}
	if s.Transport == Registry && slices.Contains(o.InsecureRegistries, s.ref.Context().RegistryStr()) {
		if s.ref, err = name.ParseReference(s.Ref, name.Insecure); err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadSource, src, err)
		}
	}
	r := &resolver{src: s, want: DefaultPlatform(), keychain: o.Keychain, rt: o.Transport}
	if o.Platform != "" {
		if r.want, err = ParsePlatform(o.Platform); err != nil {
			return nil, err
		}
		r.explicit = true
	}
	if r.keychain == nil {
		r.keychain = authn.DefaultKeychain
	}
	return r, nil
}

// Resolved is the image a source names, picked for a platform but neither
// flattened nor cached.
type Resolved struct {
	// Source is the parsed source.
	Source *Source
	// Image is the image for the platform.
	Image v1.Image
	// Digest is the digest of what the source named: for a registry, the
	// manifest's, or the index's for a multi-platform image (what docker
	// pull reports); for layouts and archives, the image manifest's.
	Digest v1.Hash
}

// Resolve finds the image src names for o.Platform (see Options), with the
// same rules and errors as Add (a *PlatformError for a platform an index
// lacks), without reading its layers. Registry blobs read later through
// Image are checked against their digests by go-containerregistry.
func Resolve(ctx context.Context, src string, o Options) (*Resolved, error) {
	r, err := newResolver(src, &o)
	if err != nil {
		return nil, err
	}
	img, err := r.resolve(ctx)
	if err != nil {
		return nil, err
	}
	d := r.digest
	if d.Hex == "" {
		if d, err = img.Digest(); err != nil {
			return nil, r.wrap(err)
		}
	}
	return &Resolved{Source: r.src, Image: img, Digest: d}, nil
}

// resolve finds the one image src names for r.want.
func (r *resolver) resolve(ctx context.Context) (v1.Image, error) {
	var (
		img v1.Image
		err error
	)
	switch r.src.Transport {
	case Registry:
		img, err = r.registry(ctx)
	case OCILayout:
		img, err = r.layout()
	case DockerArchive:
		img, err = r.archive()
	default:
		return nil, fmt.Errorf("%w: transport %q", ErrBadSource, r.src.Transport)
	}
	if err != nil {
		return nil, err
	}
	if r.explicit {
		// A single-platform image must still be what was asked for.
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, r.wrap(err)
		}
		if have := cf.Platform(); have != nil && !matches(have, r.want) {
			return nil, &PlatformError{Source: r.src.String(), Want: platformString(&r.want), Available: []string{platformString(have)}}
		}
	}
	return img, nil
}

func (r *resolver) registry(ctx context.Context) (v1.Image, error) {
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(r.keychain), remote.WithUserAgent("gvx")}
	if r.rt != nil {
		opts = append(opts, remote.WithTransport(r.rt))
	}
	desc, err := remote.Get(r.src.ref, opts...)
	if err != nil {
		return nil, r.wrap(err)
	}
	r.digest = desc.Digest
	switch {
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, r.wrap(err)
		}
		return r.pick(idx, nil, 0)
	case desc.MediaType.IsImage():
		img, err := desc.Image()
		return img, r.wrap(err)
	}
	return nil, fmt.Errorf("%w: %s is a %s, not an image or an image index", ErrUnsupported, r.src, desc.MediaType)
}

// pick chooses the image for r.want among descs (all of idx's manifests
// when descs is nil).
func (r *resolver) pick(idx v1.ImageIndex, descs []v1.Descriptor, depth int) (v1.Image, error) {
	if depth > maxIndexDepth {
		return nil, fmt.Errorf("%w: %s: indexes nested more than %d deep", ErrUnsupported, r.src, maxIndexDepth)
	}
	if descs == nil {
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, r.wrap(err)
		}
		descs = im.Manifests
	}
	var avail []string
	for _, d := range descs {
		if d.Platform == nil || d.Platform.OS == "unknown" {
			continue // attestations and other non-images
		}
		avail = append(avail, platformString(d.Platform))
		if !matches(d.Platform, r.want) {
			continue
		}
		if d.MediaType.IsImage() || d.MediaType.IsIndex() {
			return r.one(idx, d, depth+1)
		}
	}
	return nil, &PlatformError{Source: r.src.String(), Want: platformString(&r.want), Available: avail}
}

// one resolves a single descriptor of idx: an image, or an index (nested
// depth deep) to pick from.
func (r *resolver) one(idx v1.ImageIndex, d v1.Descriptor, depth int) (v1.Image, error) {
	switch {
	case d.MediaType.IsImage():
		img, err := idx.Image(d.Digest)
		return img, r.wrap(err)
	case d.MediaType.IsIndex():
		child, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, r.wrap(err)
		}
		return r.pick(child, nil, depth)
	}
	return nil, fmt.Errorf("%w: %s: %s is a %s, not an image", ErrUnsupported, r.src, d.Digest, d.MediaType)
}

func (r *resolver) layout() (v1.Image, error) {
	if _, err := os.Stat(r.src.Path); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotFound, r.src, err)
	}
	idx, err := layout.ImageIndexFromPath(r.src.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is not an OCI image layout (no index.json): %v", ErrNotFound, r.src.Path, err)
		}
		return nil, r.wrap(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, r.wrap(err)
	}
	descs := im.Manifests
	var names []string
	for _, d := range descs {
		if n := d.Annotations[refNameAnnotation]; n != "" {
			names = append(names, n)
		} else {
			names = append(names, d.Digest.String())
		}
	}
	if r.src.Ref != "" {
		descs = slices.DeleteFunc(slices.Clone(descs), func(d v1.Descriptor) bool {
			if strings.HasPrefix(r.src.Ref, "sha256:") {
				return d.Digest.String() != r.src.Ref
			}
			n := d.Annotations[refNameAnnotation]
			return n != r.src.Ref && !strings.HasSuffix(n, ":"+r.src.Ref)
		})
		if len(descs) == 0 {
			return nil, fmt.Errorf("%w: %s: no image named %q in the layout (it has: %s)", ErrNotFound, r.src.Path, r.src.Ref, strings.Join(names, ", "))
		}
	}
	switch {
	case len(descs) == 0:
		return nil, fmt.Errorf("%w: %s: the layout's index.json lists no image", ErrNotFound, r.src.Path)
	case len(descs) == 1:
		return r.one(idx, descs[0], 1)
	}
	for _, d := range descs {
		if d.Platform == nil {
			return nil, fmt.Errorf("%w: %s holds %d images; name one as oci:DIR:REF (it has: %s)", ErrBadSource, r.src.Path, len(descs), strings.Join(names, ", "))
		}
	}
	return r.pick(idx, descs, 0)
}

func (r *resolver) archive() (v1.Image, error) {
	if _, err := os.Stat(r.src.Path); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotFound, r.src, err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(r.src.Path) })
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a docker-archive (docker save) tarball: %v", ErrCorrupt, r.src.Path, err)
	}
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	var tag *name.Tag
	if r.src.Ref != "" {
		t, err := name.NewTag(r.src.Ref)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: tag %q: %v", ErrBadSource, r.src, r.src.Ref, err)
		}
		found := false
		for _, s := range tags {
			if have, err := name.NewTag(s); err == nil && have.Name() == t.Name() {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %s has no image tagged %s (it has: %s)", ErrNotFound, r.src.Path, r.src.Ref, strings.Join(tags, ", "))
		}
		tag = &t
	} else if len(m) != 1 {
		return nil, fmt.Errorf("%w: %s holds %d images; name one as docker-archive:TAR:TAG (it has: %s)", ErrBadSource, r.src.Path, len(m), strings.Join(tags, ", "))
	}
	img, err := tarball.ImageFromPath(r.src.Path, tag)
	return img, r.wrap(err)
}

// wrap classifies registry and parse errors into the package's sentinels.
func (r *resolver) wrap(err error) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w: %s: %w (log in with `docker login`, or set DOCKER_CONFIG)", ErrAuth, r.src, err)
		case http.StatusNotFound:
			return fmt.Errorf("%w: %s: %w", ErrNotFound, r.src, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("%w: %s: %w (log in with `docker login`, or set DOCKER_CONFIG)", ErrAuth, r.src, err)
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%w: %s: %w", ErrNotFound, r.src, err)
			}
		}
	}
	return fmt.Errorf("image: %s: %w", r.src, err)
}
