package image

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Transport says where an image comes from.
type Transport string

const (
	// Registry is a registry reference ("docker.io/library/docker:dind",
	// "localhost:5000/x:y", "x@sha256:…").
	Registry Transport = "registry"
	// OCILayout is an OCI image layout directory: "oci:DIR[:REF]".
	OCILayout Transport = "oci"
	// DockerArchive is a `docker save` tarball: "docker-archive:TAR[:TAG]".
	DockerArchive Transport = "docker-archive"
)

// Source is a parsed SOURCE argument.
type Source struct {
	Transport Transport
	// Ref is the registry reference (Registry), the reference name or
	// digest inside the layout (OCILayout, may be empty) or the repo:tag
	// inside the archive (DockerArchive, may be empty).
	Ref string
	// Path is the layout directory or archive file, made absolute.
	Path string

	ref name.Reference // Registry only
}

// ParseSource parses a SOURCE as the CLI takes it. As in skopeo, the path
// of oci: and docker-archive: sources ends at the first ':' after the
// transport (so it cannot contain one); the rest is the reference.
func ParseSource(s string) (*Source, error) {
	for _, t := range []Transport{OCILayout, DockerArchive} {
		rest, ok := strings.CutPrefix(s, string(t)+":")
		if !ok {
			continue
		}
		path, ref, _ := strings.Cut(rest, ":")
		if path == "" {
			return nil, fmt.Errorf("%w: %q: want %s:PATH[:REF]", ErrBadSource, s, t)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadSource, s, err)
		}
		if t == DockerArchive && ref != "" {
			if _, err := name.NewTag(ref); err != nil {
				return nil, fmt.Errorf("%w: %q: tag %q: %v", ErrBadSource, s, ref, err)
			}
		}
		return &Source{Transport: t, Path: abs, Ref: ref}, nil
	}
	if s == "" {
		return nil, fmt.Errorf("%w: empty reference", ErrBadSource)
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return nil, fmt.Errorf("%w: %q: a reference has no scheme (write host/repo:tag)", ErrBadSource, s)
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadSource, s, err)
	}
	// The fully qualified name is what the cache records; a short name
	// whose qualified form is no longer valid (a repository name at the
	// length limit grows by the default registry's namespace) is refused
	// here rather than stored unparsable.
	if _, err := name.ParseReference(ref.Name()); err != nil {
		return nil, fmt.Errorf("%w: %q: its fully qualified form %q is not a valid reference: %v", ErrBadSource, s, ref.Name(), err)
	}
	return &Source{Transport: Registry, Ref: ref.Name(), ref: ref}, nil
}

// String returns the canonical form of the source: the fully qualified
// reference for registries, "TRANSPORT:ABSPATH[:REF]" otherwise. The
// cache's index is keyed by it.
func (s *Source) String() string {
	if s.Transport == Registry {
		return s.Ref
	}
	out := string(s.Transport) + ":" + s.Path
	if s.Ref != "" {
		out += ":" + s.Ref
	}
	return out
}

// Canonical returns ParseSource(s).String(), or s itself when it does not
// parse, so a stale index entry can still be named.
func Canonical(s string) string {
	src, err := ParseSource(s)
	if err != nil {
		return s
	}
	return src.String()
}
