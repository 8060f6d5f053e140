package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/cache"
)

// Local names. A name is a registry-style reference NAME[:TAG] recorded in
// the cache's index for an image already there, as `docker tag` records
// one in a daemon: "docker:dind" can then name an image that was added
// from oci:/srv/images/dind, and a cache that knows a name resolves it
// with no network (Get, PullMissing and PullNever).
//
// Names live in the same index as the sources Add records, one entry per
// name and profile (a Result whose Ref is the name and whose Source is
// what the image was added from), written by the same atomic Update: a
// name keeps its image's files from GC until `image rm NAME`, and a later
// Add of the name from its registry replaces it, as a docker pull does.

// ErrNotCached reports a registry reference the cache has no image for.
// Errors that wrap it also wrap ErrNotFound.
var ErrNotCached = errors.New("image: not in the cache")

// NormalizeName returns the canonical form of a local name, as Docker
// normalises it: a missing registry is docker.io (written index.docker.io,
// as go-containerregistry names it), a one-component repository on it is
// under library/, a missing tag is latest. "docker:dind",
// "docker.io/library/docker:dind" and "index.docker.io/library/docker:dind"
// are one name. Nothing is contacted. A digest, a path or a transport
// (oci:, docker-archive:) is not a name.
func NormalizeName(s string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: local name %q: %s (want NAME[:TAG], e.g. docker:dind or registry.example:5000/team/app:v1)", ErrBadSource, s, why)
	}
	if strings.HasPrefix(s, string(OCILayout)+":") || strings.HasPrefix(s, string(DockerArchive)+":") {
		return "", bad("a transport is not a name")
	}
	if strings.Contains(s, "@") {
		return "", bad("a digest cannot be a name")
	}
	src, err := ParseSource(s)
	if err != nil {
		return "", bad(err.Error())
	}
	if _, ok := src.ref.(name.Tag); !ok {
		return "", bad("not a tag")
	}
	return src.Ref, nil
}

// normalizeNames normalises each of names, or fails on the first bad one.
func normalizeNames(names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	for _, n := range names {
		c, err := NormalizeName(n)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// FamiliarName returns the short form Docker prints for a canonical
// registry reference: docker.io and its library/ dropped
// ("index.docker.io/library/docker:dind" → "docker:dind",
// "index.docker.io/team/app:v1" → "team/app:v1"), except where the short
// form would read as a source of another transport ("oci:latest" is a
// layout; docker.io/library/oci:latest the name). Anything else, sources
// of other transports included, is returned as it is.
func FamiliarName(ref string) string {
	for _, reg := range []string{name.DefaultRegistry + "/", "docker.io/"} {
		rest, ok := strings.CutPrefix(ref, reg)
		if !ok {
			continue
		}
		short := rest
		if r, ok := strings.CutPrefix(rest, "library/"); ok && !strings.Contains(strings.SplitN(r, ":", 2)[0], "/") {
			short = r
		}
		if strings.HasPrefix(short, string(OCILayout)+":") || strings.HasPrefix(short, string(DockerArchive)+":") {
			return "docker.io/" + rest
		}
		return short
	}
	return ref
}

// putName records canon as a name of res (whose files are objects) in ix
// and returns the entry's record. Naming an entry after itself changes
// nothing.
func putName(ix *cache.Index, canon string, res *Result, objects []string) (*Result, error) {
	m := entryMeta(res)
	if canon == res.Ref {
		return m, nil
	}
	m.Ref = canon
	if m.Source == "" {
		m.Source = res.Ref // a name of a name records the first source
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ix.Entries[entryName(canon, m.Profile)] = cache.Entry{Objects: slices.Clone(objects), Meta: meta}
	return m, nil
}

// Tag records newName (NAME[:TAG]) for the cached image src names: a
// source as it was added (in any form Canonical maps to the same one), a
// name, or a cache digest (Result.Digest). Every profile src is cached in
// gets the name. An existing name is moved, as docker tag moves it. It
// returns the new entries.
func Tag(c *cache.Cache, src, newName string) ([]*Result, error) {
	canon, err := NormalizeName(newName)
	if err != nil {
		return nil, err
	}
	want := Canonical(src)
	var tagged []*Result
	err = c.Update(func(ix *cache.Index) error {
		tagged = nil
		byProfile := map[string]string{} // profile → the entry to copy
		for key, e := range ix.Entries {
			var r Result
			if json.Unmarshal(e.Meta, &r) != nil || r.Ref != want && r.Ref != src && r.Digest != src {
				continue
			}
			if k, ok := byProfile[r.Profile]; !ok || key < k {
				byProfile[r.Profile] = key
			}
		}
		for _, key := range byProfile {
			e := ix.Entries[key]
			var r Result
			if err := json.Unmarshal(e.Meta, &r); err != nil {
				return err
			}
			t, err := putName(ix, canon, &r, e.Objects)
			if err != nil {
				return err
			}
			tagged = append(tagged, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tagged) == 0 {
		return nil, fmt.Errorf("%w: no image %q in the cache %s to name (add it first: gvx-vol image add --tag %s SOURCE)", ErrNotFound, src, c.Dir(), newName)
	}
	slices.SortFunc(tagged, func(a, b *Result) int { return strings.Compare(a.Profile, b.Profile) })
	return tagged, nil
}

// isDigest reports whether s has the form of Result.Digest,
// sha256:[0-9a-f]{64}. (Not a package-level regexp: every gvx-vol start,
// clone's included, would compile it.)
func isDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := range len(hex) {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Lookup returns the image the cache holds for a registry reference (a
// local name, or a reference added before) in profile ("" is "runtime"),
// with the paths of its files, reading nothing but the index: no network,
// and no write access to the cache needed. A reference the cache does not
// hold, or whose files are gone, is an error wrapping ErrNotCached.
func Lookup(c *cache.Cache, ref, profile string) (*Result, error) {
	s, err := ParseSource(ref)
	if err != nil {
		return nil, err
	}
	if s.Transport != Registry {
		return nil, fmt.Errorf("%w: %s is not a registry reference or name", ErrBadSource, ref)
	}
	prof := erofs.ProfileRuntime
	if profile != "" {
		if prof, err = erofs.ParseProfile(profile); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSource, err)
		}
	}
	ix, err := c.Index()
	if err != nil {
		return nil, err
	}
	notCached := func(why string) error {
		return fmt.Errorf("%w: %w: %s%s in %s", ErrNotCached, ErrNotFound, ref, why, c.Dir())
	}
	e, ok := ix.Entries[entryName(s.Ref, prof.String())]
	if !ok {
		return nil, notCached("")
	}
	var r Result
	if err := json.Unmarshal(e.Meta, &r); err != nil || r.Ref != s.Ref || r.Profile != prof.String() || !isDigest(r.Digest) || !isDigest(r.ConfigDigest) {
		return nil, fmt.Errorf("%w: index entry %q of %s: bad metadata", cache.ErrCorrupt, entryName(s.Ref, prof.String()), c.Dir())
	}
	if r.EROFS, err = c.Lookup(strings.TrimPrefix(r.Digest, "sha256:") + extEROFS); err != nil {
		return nil, notCached(": its EROFS file is gone (add it again)")
	}
	if r.Config, err = c.Lookup(strings.TrimPrefix(r.ConfigDigest, "sha256:") + extConfig); err != nil {
		return nil, notCached(": its config file is gone (add it again)")
	}
	return &r, nil
}
