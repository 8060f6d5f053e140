package image

import (
	"testing"
)

// FuzzParseSource: any SOURCE string parses or fails with an error, and a
// parsed source's canonical form parses back to itself (the cache index is
// keyed by it, and `image rm` matches on it).
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"oci:/x:y", "docker-archive:/a.tar:app:v1", "localhost:5000/x:y", "busybox", "x@sha256:" + h64, "oci:", "a:b:c@d", "[::1]:5000/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource(s)
		if err != nil {
			return
		}
		again, err := ParseSource(src.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", src, s, err)
		}
		if again.String() != src.String() {
			t.Fatalf("canonical form moved: %q → %q → %q", s, src, again)
		}
	})
}

// FuzzParsePlatform: no panic; what parses prints back to itself.
func FuzzParsePlatform(f *testing.F) {
	for _, s := range []string{"linux/amd64", "linux/arm/v7", "linux", "/", "a/b/c/d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlatform(s)
		if err != nil {
			return
		}
		if got := platformString(&p); got != s {
			t.Fatalf("ParsePlatform(%q) prints as %q", s, got)
		}
	})
}
