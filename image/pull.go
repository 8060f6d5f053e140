package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	short := !hasRegistryHost(src)
	if short {
		if near := nearName(c, s.Ref); near != "" {
			return nil, &notCachedError{fmt.Sprintf("%s is not in the image cache; did you mean %s? (gvx-vol image ls lists the cache; to fetch %s from its registry anyway, give its full reference, %s)", src, FamiliarName(near), src, s.Ref)}
		}
	}
	res, err = Add(ctx, c, src, o)
	if err != nil && short {
		f := FamiliarName(s.Ref)
		err = fmt.Errorf("%w (%s is not in the image cache either: `gvx-vol image ls` lists what is; `gvx-vol image add --tag %s SOURCE` adds an image under that name)", err, f, f)
	}
	return res, err
}

// notCachedError is a message that wraps ErrNotCached and ErrNotFound
// without their words in front.
type notCachedError struct{ msg string }

func (e *notCachedError) Error() string   { return e.msg }
func (e *notCachedError) Unwrap() []error { return []error{ErrNotCached, ErrNotFound} }

// hasRegistryHost reports whether a reference as typed names its registry:
// its first path component has a dot or a port, or is localhost, as
// Docker decides. "docker:dind" and "team/app" do not.
func hasRegistryHost(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}

// nearName returns a registry reference the cache's index knows (a local
// name, or a reference added before) that canonical reference ref looks
// like a typo of: at most two edits away, and not only in digits
// (python:3.11 cached does not make python:3.12 a typo: a new version is
// pulled). "" when there is none or the index cannot be read. The nearest
// wins; ties go to the first in List's order.
func nearName(c *cache.Cache, ref string) string {
	all, err := List(c)
	if err != nil {
		return ""
	}
	best, bestD := "", 3
	for _, r := range all {
		if r.Ref == ref || strings.HasPrefix(r.Ref, string(OCILayout)+":") || strings.HasPrefix(r.Ref, string(DockerArchive)+":") {
			continue
		}
		if stripDigits(r.Ref) == stripDigits(ref) {
			continue
		}
		if d := editDistance(r.Ref, ref, bestD); d < bestD {
			best, bestD = r.Ref, d
		}
	}
	return best
}

// stripDigits drops ASCII digits and dots: what differs between two
// versions of one image.
func stripDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r == '.' {
			return -1
		}
		return r
	}, s)
}

// editDistance is the Levenshtein distance of a and b in bytes, or limit
// when it is limit or more (references are short: at most a few hundred
// bytes, so the table is small).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}
