package image

import (
	"fmt"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatform is the platform picked from multi-platform images when
// none is asked for: Linux (what gVisor runs) on the host's architecture.
func DefaultPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// ParsePlatform parses "os/arch[/variant]" ("linux/arm64", "linux/arm/v7").
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || len(parts) == 3 && parts[2] == "" {
		return v1.Platform{}, fmt.Errorf("%w: platform %q: want os/arch[/variant], e.g. linux/amd64", ErrBadSource, s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

func platformString(p *v1.Platform) string {
	if p == nil {
		return ""
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// matches reports whether have satisfies want: equal OS and architecture,
// and equal variant when want names one.
func matches(have *v1.Platform, want v1.Platform) bool {
	return have != nil && have.OS == want.OS && have.Architecture == want.Architecture &&
		(want.Variant == "" || have.Variant == want.Variant)
}
