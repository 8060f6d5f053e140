package goldencmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// --pull happens on the host, not through the guest's daemon: the guest
// needs no network at all, the host's registry credentials
// (authn.DefaultKeychain: $DOCKER_CONFIG or ~/.docker/config.json and its
// helpers) apply, and every blob is checked against its digest by the
// client before the daemon sees it. Each reference becomes one
// docker-archive tarball (tagged with the reference) in a private
// directory next to OUT, which the guest loads like a --load tar.
//
// Plain HTTP: go-containerregistry talks HTTP, not HTTPS, to registries on
// loopback (localhost, 127.0.0.0/8, ::1), *.local and RFC 1918 addresses;
// --insecure-registry HOST[:PORT] adds others.

// pullSpec is one --pull reference, parsed.
type pullSpec struct {
	given string         // as the user typed it
	ref   name.Reference // what to fetch (by tag or by digest)
	tag   name.Tag       // the tag it gets in the archive
}

// parsePull parses a --pull reference. A digest reference must name a tag
// too (REPO:TAG@sha256:…): a docker-archive carries tags, not digests, and
// an untagged image in a golden volume could not be named by anyone.
func parsePull(s string, insecure []string) (*pullSpec, error) {
	var opts []name.Option
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("--pull %q: not an image reference: %w", s, err)
	}
	for _, h := range insecure {
		if ref.Context().RegistryStr() == h {
			opts = append(opts, name.Insecure)
			if ref, err = name.ParseReference(s, opts...); err != nil {
				return nil, fmt.Errorf("--pull %q: %w", s, err)
			}
			break
		}
	}
	p := &pullSpec{given: s, ref: ref}
	switch r := ref.(type) {
	case name.Tag:
		p.tag = r
	case name.Digest:
		base, _, _ := strings.Cut(s, "@")
		t, err := name.NewTag(base, append(opts, name.StrictValidation)...)
		if err != nil {
			return nil, fmt.Errorf("--pull %q: name a tag with the digest (REPO:TAG@sha256:…): the image is loaded under that tag", s)
		}
		p.tag = t
	default:
		return nil, fmt.Errorf("--pull %q: unsupported reference", s)
	}
	return p, nil
}

// pulled is one image written as a docker-archive on the host.
type pulled struct {
	spec   *pullSpec
	path   string  // the docker-archive
	digest v1.Hash // the registry's manifest digest for the reference
	id     v1.Hash // the config digest: the image ID the daemon lists
	layers int
	bytes  int64 // compressed layer bytes
}

// puller pulls references on the host.
type puller struct {
	platform v1.Platform
	keychain authn.Keychain
	rt       remote.Option // a transport, in tests; nil: the default
	log      io.Writer
}

// pull resolves p for the platform and streams it into dir as a
// docker-archive. Layers go from the registry through digest verification
// to the file without being held in memory.
func (pl *puller) pull(ctx context.Context, p *pullSpec, dir string, n int) (*pulled, error) {
	wrap := func(err error) error { return fmt.Errorf("--pull %s: %w", p.given, err) }
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(pl.keychain),
		remote.WithPlatform(pl.platform), remote.WithUserAgent("gvx-vol")}
	if pl.rt != nil {
		opts = append(opts, pl.rt)
	}
	desc, err := remote.Get(p.ref, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	img, err := pl.image(desc)
	if err != nil {
		return nil, wrap(err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return nil, wrap(err)
	}
	ls, err := img.Layers()
	if err != nil {
		return nil, wrap(err)
	}
	var total int64
	for _, l := range ls {
		sz, err := l.Size()
		if err != nil {
			return nil, wrap(err)
		}
		total += sz
	}
	fmt.Fprintf(pl.log, "pull %s: %d layers, %s\n", p.given, len(ls), mib(total))

	path := filepath.Join(dir, fmt.Sprintf("pull-%d.tar", n))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, wrap(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = tarball.MultiRefWrite(map[name.Reference]v1.Image{p.tag: img}, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, wrap(err)
	}
	return &pulled{spec: p, path: path, digest: desc.Digest, id: id, layers: len(ls), bytes: total}, nil
}

// image picks the image desc names for the platform: itself, or its
// index's entry for the platform (an error lists what the index has).
func (pl *puller) image(desc *remote.Descriptor) (v1.Image, error) {
	want := platformString(pl.platform)
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		var have []string
		for _, d := range im.Manifests {
			if d.Platform == nil || d.Platform.OS == "unknown" {
				continue // attestations
			}
			have = append(have, platformString(*d.Platform))
			if d.Platform.Satisfies(pl.platform) && d.MediaType.IsImage() {
				return idx.Image(d.Digest)
			}
		}
		return nil, fmt.Errorf("no %s image in the index (it has: %s); see --platform", want, strings.Join(have, ", "))
	}
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("a %s is not an image", desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if have := cf.Platform(); have != nil && have.OS != "" && !have.Satisfies(pl.platform) {
		return nil, fmt.Errorf("the image is %s, not %s; see --platform", platformString(*have), want)
	}
	return img, nil
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// pullAll pulls every spec into a new private directory next to out and
// returns the directory (the caller removes it) and the archives, in order.
func (pl *puller) pullAll(ctx context.Context, specs []*pullSpec, out string) (string, []*pulled, error) {
	if len(specs) == 0 {
		return "", nil, nil
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".pull-")
	if err != nil {
		return "", nil, fmt.Errorf("--pull: a directory next to %s: %w", out, err)
	}
	var ps []*pulled
	for i, s := range specs {
		p, err := pl.pull(ctx, s, dir, i)
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		ps = append(ps, p)
	}
	return dir, ps, nil
}

// familiar is the name the Docker daemon lists for t: docker.io and
// library/ dropped as `docker images` does.
func familiar(t name.Tag) string {
	repo := t.RepositoryStr()
	if reg := t.RegistryStr(); reg != name.DefaultRegistry && reg != "docker.io" {
		repo = reg + "/" + repo
	} else if r, ok := strings.CutPrefix(repo, "library/"); ok && !strings.Contains(r, "/") {
		repo = r
	}
	return repo + ":" + t.TagStr()
}

// annotate gives the daemon's listing of each pulled image the reference
// as given and the registry's manifest digest, and checks every pull is
// there under its tag and ID.
func annotate(images []Image, ps []*pulled) error {
	var errs []error
	for _, p := range ps {
		want, found := familiar(p.spec.tag), false
		for i := range images {
			if images[i].Ref == want && images[i].ID == p.id.String() {
				images[i].Ref, images[i].Digest, found = p.spec.given, p.digest.String(), true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("--pull %s: the daemon does not list %s with ID %s after loading it", p.spec.given, want, p.id))
		}
	}
	return errors.Join(errs...)
}
