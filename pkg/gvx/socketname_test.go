package gvx

import (
	"regexp"
	"testing"
)

// TestIsSocketName: isSocketName accepts exactly what the regexp it
// replaced did.
func TestIsSocketName(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9_-]{1,16}$`)
	cases := []string{"", "a", "docker", "a_b-c9", "0123456789abcdef", "0123456789abcdefg", "A", "a.b", "a/b", "a\n", "é"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string(rune(c)), "x"+string([]byte{byte(c)}))
	}
	for _, s := range cases {
		if isSocketName(s) != re.MatchString(s) {
			t.Errorf("isSocketName(%q) = %v, the regexp says %v", s, isSocketName(s), re.MatchString(s))
		}
	}
}
