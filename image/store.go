package image

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"z.gfire.dev/gvx/erofs/cache"
)

// entryName keys the cache index: one entry per source and profile.
func entryName(ref, profile string) string { return profile + " " + ref }

// entryMeta is what the index keeps of a Result: no paths (they follow
// from the cache directory) and no per-call facts.
func entryMeta(r *Result) *Result {
	m := *r
	m.EROFS, m.Config, m.Created = "", "", false
	m.DroppedXattrs = nil
	return &m
}

// List returns the images recorded in c's index, sorted by reference and
// profile, with the paths of their files. An entry whose files are gone
// (the cache was tampered with) has empty EROFS/Config paths.
func List(c *cache.Cache) ([]*Result, error) {
	ix, err := c.Index()
	if err != nil {
		return nil, err
	}
	var out []*Result
	for name, e := range ix.Entries {
		var r Result
		if err := json.Unmarshal(e.Meta, &r); err != nil || r.Ref == "" {
			return nil, fmt.Errorf("%w: index entry %q: bad metadata", cache.ErrCorrupt, name)
		}
		key := strings.TrimPrefix(r.Digest, "sha256:")
		if p, err := c.Lookup(key + extEROFS); err == nil {
			r.EROFS = p
		}
		if p, err := c.Lookup(strings.TrimPrefix(r.ConfigDigest, "sha256:") + extConfig); err == nil {
			r.Config = p
		}
		out = append(out, &r)
	}
	slices.SortFunc(out, func(a, b *Result) int {
		if c := strings.Compare(a.Ref, b.Ref); c != 0 {
			return c
		}
		return strings.Compare(a.Profile, b.Profile)
	})
	return out, nil
}

// Remove drops ref's index entries (every profile, or only profile when it
// is not empty) and returns what it dropped. The files stay until GC. ref
// is matched in canonical form, so "busybox" names what
// "docker.io/library/busybox:latest" added; a cache digest
// ("sha256:…", Result.Digest) names every entry of that flattened image.
func Remove(c *cache.Cache, ref, profile string) ([]*Result, error) {
	canon := Canonical(ref)
	var removed []*Result
	err := c.Update(func(ix *cache.Index) error {
		removed = nil
		for name, e := range ix.Entries {
			var r Result
			if json.Unmarshal(e.Meta, &r) != nil {
				continue
			}
			if r.Ref != canon && r.Ref != ref && r.Digest != ref {
				continue
			}
			if profile != "" && r.Profile != profile {
				continue
			}
			delete(ix.Entries, name)
			removed = append(removed, &r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("%w: no image %q in the cache (see gvx-vol image ls)", ErrNotFound, ref)
	}
	return removed, nil
}

// GC removes the cache's files that no image entry names (see cache.GC).
func GC(c *cache.Cache) (*cache.GCResult, error) { return c.GC() }
