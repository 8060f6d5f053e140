package image

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// failTransport fails the test on any request: what uses it must not
// reach a registry.
type failTransport struct{ t *testing.T }

func (f failTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.t.Errorf("a registry was asked: %s %s", req.Method, req.URL)
	return nil, errors.New("failTransport: no network in this test")
}

// TestGetTypoHint: a name typed without a registry host that the cache
// does not hold but is two edits or fewer from one it does (docker:dnd,
// docker:dind cached) is refused before any registry is asked, naming the
// cached name and `gvx-vol image ls`; a version that differs only in
// digits, a full reference and an unrelated name are not typos and go to
// the registry; a plain miss of a short name names image ls and image add.
func TestGetTypoHint(t *testing.T) {
	hermetic(t)
	c := newCache(t)
	if _, err := Add(ctx, c, layoutSource(t, "a"), Options{Tags: []string{"docker:dind", "python:3.11"}}); err != nil {
		t.Fatal(err)
	}
	for _, typo := range []string{"docker:dnd", "docker:dindd", "dokcer:dind", "library/docker:dimd"} {
		_, err := Get(ctx, c, typo, PullMissing, Options{Transport: failTransport{t}})
		want := typo + " is not in the image cache; did you mean docker:dind? (gvx-vol image ls lists the cache"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ErrNotCached) || !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s): %v, want %q…", typo, err, want)
		}
	}
	for _, ref := range []string{"python:3.12", "localhost:5000/docker:dnd", "alpine:3"} {
		rec := &recorder{}
		_, err := Get(ctx, c, ref, PullMissing, Options{Transport: rec})
		if err == nil || strings.Contains(err.Error(), "did you mean") || len(rec.requests()) == 0 {
			t.Errorf("Get(%s): %v after %d requests (want a fetch that fails, no hint)", ref, err, len(rec.requests()))
		}
		short := !strings.Contains(ref, "/")
		if names := err != nil && strings.Contains(err.Error(), "gvx-vol image ls") && strings.Contains(err.Error(), "gvx-vol image add --tag "+ref); names != short {
			t.Errorf("Get(%s): %v: names image ls and add: %v, want %v", ref, err, names, short)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"dnd", "dind", 1}, {"dind", "dnid", 2}, {"abc", "xyz", 3}, {"a", "abcdef", 3}, {"kitten", "sitting", 3}} {
		if got := editDistance(c.a, c.b, 3); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
