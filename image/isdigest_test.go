package image

import (
	"regexp"
	"strings"
	"testing"
)

// TestIsDigest: isDigest accepts exactly what the regexp it replaced did.
func TestIsDigest(t *testing.T) {
	re := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	hex := strings.Repeat("0123456789abcdef", 4)
	cases := []string{"", "sha256:", "sha256:" + hex, "sha256:" + hex + "0", "sha256:" + hex[1:], "sha512:" + hex,
		"SHA256:" + hex, " sha256:" + hex, "sha256:" + hex + "\n"}
	for i := range len(hex) {
		for _, c := range "09afgA/:\x00\xff" {
			cases = append(cases, "sha256:"+hex[:i]+string(c)+hex[i+1:])
		}
	}
	for _, s := range cases {
		if isDigest(s) != re.MatchString(s) {
			t.Errorf("isDigest(%q) = %v, the regexp says %v", s, isDigest(s), re.MatchString(s))
		}
	}
}
