package golden

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"z.gfire.dev/gvx/image"
)

// Pulls happen on the host, not through the guest's daemon: the guest
// needs no network at all, the host's registry credentials
// (authn.DefaultKeychain: $DOCKER_CONFIG or ~/.docker/config.json and its
// helpers) apply, and every blob is checked against its digest by the
// client before the daemon sees it. Each reference is resolved by package
// image's resolver (image.Resolve: the platform rules and errors of
// gvx-vol image add) and becomes one docker-archive tarball (tagged with
// the reference) in a private directory next to Out, which the guest loads
// like a Loads tar.
//
// Plain HTTP: go-containerregistry talks HTTP, not HTTPS, to registries on
// loopback (localhost, 127.0.0.0/8, ::1), *.local and RFC 1918 addresses;
// Options.InsecureRegistries adds others.

// pullSpec is one Pulls reference, parsed.
type pullSpec struct {
	given string   // as the caller gave it; what image.Resolve resolves
	tag   name.Tag // the tag it gets in the archive
}

// parsePull parses a Pulls reference. A digest reference must name a tag
// too (REPO:TAG@sha256:…): a docker-archive carries tags, not digests, and
// an untagged image in a golden volume could not be named by anyone.
func parsePull(s string) (*pullSpec, error) {
	src, err := image.ParseSource(s)
	if err != nil || src.Transport != image.Registry {
		return nil, fmt.Errorf("%w: pull %q: not an image reference (want REPO[:TAG] or REPO:TAG@sha256:…)", ErrBadOption, s)
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%w: pull %q: not an image reference: %v", ErrBadOption, s, err)
	}
	p := &pullSpec{given: s}
	switch r := ref.(type) {
	case name.Tag:
		p.tag = r
	case name.Digest:
		base, _, _ := strings.Cut(s, "@")
		t, err := name.NewTag(base, name.StrictValidation)
		if err != nil {
			return nil, fmt.Errorf("%w: pull %q: name a tag with the digest (REPO:TAG@sha256:…): the image is loaded under that tag", ErrBadOption, s)
		}
		p.tag = t
	default:
		return nil, fmt.Errorf("%w: pull %q: unsupported reference", ErrBadOption, s)
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
	opts image.Options // platform, registries, credentials, transport
	log  io.Writer
}

// pull resolves p and streams it into dir as a docker-archive. Layers go
// from the registry through digest verification to the file without
// being held in memory.
func (pl *puller) pull(ctx context.Context, p *pullSpec, dir string, n int) (*pulled, error) {
	wrap := func(err error) error { return fmt.Errorf("pull %s: %w", p.given, err) }
	res, err := image.Resolve(ctx, p.given, pl.opts)
	if err != nil {
		return nil, wrap(err)
	}
	img := res.Image
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
	return &pulled{spec: p, path: path, digest: res.Digest, id: id, layers: len(ls), bytes: total}, nil
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
		return "", nil, fmt.Errorf("pull: a directory next to %s: %w", out, err)
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
// library/ dropped as `docker images` does, even where the short form
// reads as another transport to gvx ("oci:latest"), which
// image.FamiliarName keeps long.
func familiar(t name.Tag) string {
	return strings.TrimPrefix(image.FamiliarName(t.Name()), "docker.io/library/")
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
			errs = append(errs, fmt.Errorf("pull %s: the daemon does not list %s with ID %s after loading it", p.spec.given, want, p.id))
		}
	}
	return errors.Join(errs...)
}
