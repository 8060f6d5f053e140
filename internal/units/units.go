// Package units parses the sizes gvx's commands take: "8G", "4g", "512M",
// "512MiB", "1.5T" or plain bytes. Suffixes are binary (G = GiB), as in
// docker (-m 4g) and truncate(1).
//
//	n, err := units.ParseSize("32G") // 34359738368
package units

import (
	"fmt"
	"strings"

	"github.com/dsnet/golib/unitconv"
)

// ParseSize parses a size with an optional binary suffix (K, M, G, T, P,
// E; any case; an optional "i" and "B"). Negative sizes and sizes over
// 2^62 are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "i"), "I")
	if t != "" {
		switch last := t[len(t)-1]; last {
		case 'k', 'm', 'g', 't', 'p', 'e':
			t = t[:len(t)-1] + strings.ToUpper(string(last))
		}
		if c := t[len(t)-1]; c >= 'A' && c <= 'Z' {
			t += "i"
		}
	}
	v, err := unitconv.ParsePrefix(t, unitconv.IEC)
	if err != nil || v < 0 || v > 1<<62 {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional K, M, G or T suffix (e.g. 8G)", s)
	}
	return int64(v), nil
}

// FormatSize renders n bytes with a binary prefix ("1.5 GiB"), as gvx's
// commands print sizes.
func FormatSize(n int64) string {
	return unitconv.FormatPrefix(float64(n), unitconv.IEC, 1) + "B"
}
