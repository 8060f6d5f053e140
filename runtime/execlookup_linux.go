package runtime

import (
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// shadowedBy reports the paths the image does not decide at start: those
// under a mount of the spec (a volume, a bind, a tmpfs, the relay's image)
// and the files rungv adds to the rootfs's writable layer.
func shadowedBy(mounts []specs.Mount, upper []upperFile) func(string) bool {
	return func(p string) bool {
		for _, m := range mounts {
			d := path.Clean(m.Destination)
			if p == d || strings.HasPrefix(p, d+"/") || d == "/" {
				return true
			}
		}
		for _, u := range upper {
			if path.Clean(u.path) == p {
				return true
			}
		}
		return false
	}
}
