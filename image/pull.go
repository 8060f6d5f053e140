package image

import (
	"context"
	"errors"
	"fmt"

	"z.gfire.dev/gvx/erofs/cache"
)

// PullPolicy says when Get fetches an image named by a registry reference
// rather than taking it from the cache, as docker run --pull does. Local
// sources (oci:, docker-archive:) are read whatever the policy: they need
// no network.
type PullPolicy string

// Pull policies.
const (
	// PullMissing (the default, "") takes a reference the cache knows (a
	// local name, or an image added before) from the cache, with no
	// network, and fetches only one it does not know.
	PullMissing PullPolicy = "missing"
	// PullAlways fetches from the registry every time (Add).
	PullAlways PullPolicy = "always"
	// PullNever never touches the network: a reference the cache does not
	// know is an error wrapping ErrNotCached.
	PullNever PullPolicy = "never"
)

// ParsePullPolicy parses a policy as --pull takes it ("" is PullMissing).
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch PullPolicy(s) {
	case "", PullMissing:
		return PullMissing, nil
	case PullAlways, PullNever:
		return PullPolicy(s), nil
	}
	return "", fmt.Errorf("%w: pull policy %q: want missing, always or never", ErrBadSource, s)
}

// Get returns the cached image src names under the pull policy: a local
// source is added (read again, built only if new); a registry reference
// is looked up (Lookup) unless the policy is PullAlways, and fetched
// (Add) when missing unless the policy is PullNever. A cached image of
// another platform than an explicit o.Platform counts as missing.
func Get(ctx context.Context, c *cache.Cache, src string, pull PullPolicy, o Options) (*Result, error) {
	pull, err := ParsePullPolicy(string(pull))
	if err != nil {
		return nil, err
	}
	s, err := ParseSource(src)
	if err != nil {
		return nil, err
	}
	if s.Transport != Registry {
		return Add(ctx, c, src, o)
	}
	if pull == PullAlways {
		res, err := Add(ctx, c, src, o)
		if err != nil {
			if local, lerr := Lookup(c, src, o.Profile); lerr == nil && local.Source != "" {
				return nil, fmt.Errorf("%w (%s is a local name of %s in the cache: pull policy missing or never uses it)", err, FamiliarName(s.Ref), local.Source)
			}
		}
		return res, err
	}
	res, err := Lookup(c, src, o.Profile)
	if err == nil && o.Platform != "" && res.Platform != "" {
		want, perr := ParsePlatform(o.Platform)
		if perr != nil {
			return nil, perr
		}
		have, perr := ParsePlatform(res.Platform)
		if perr != nil || !matches(&have, want) {
			err = fmt.Errorf("%w: %w: %s is cached for %s, not %s", ErrNotCached, ErrNotFound, src, res.Platform, o.Platform)
		}
	}
	switch {
	case err == nil:
		return res, nil
	case !errors.Is(err, ErrNotCached):
		return nil, err
	case pull == PullNever:
		return nil, fmt.Errorf("%w; the pull policy is never, so it is not fetched: add it with `gvx-vol image add --tag %s SOURCE` (SOURCE: oci:DIR, docker-archive:TAR or a registry reference), or allow the pull (--pull missing)", err, FamiliarName(s.Ref))
	}
	return Add(ctx, c, src, o)
}
