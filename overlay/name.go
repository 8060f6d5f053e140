package overlay

import (
	"fmt"
	"strings"
)

// cleanName turns an archive entry name into a sink path. Leading "/" and
// "./" are stripped as GNU tar does, empty and "." elements dropped, and any
// ".." element refused (never resolved: "a/../b" is refused too, since a
// symlink at "a" would make resolving it unsafe). The root is ".".
func cleanName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", ErrCorrupt)
	}
	// Most names are clean already but for GNU tar's "./" and a
	// directory's trailing "/": those are returned without a copy.
	if s := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/"); isClean(s) {
		return s, nil
	}
	var out []string
	for _, e := range strings.Split(name, "/") {
		switch e {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("%w: %q has a \"..\" element", ErrUnsafePath, name)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return ".", nil
	}
	return strings.Join(out, "/"), nil
}

// joinPath joins two sink paths.
// isClean reports whether s is a non-empty relative path of elements that
// are neither empty, "." nor "..": what cleanName would return for it.
func isClean(s string) bool {
	for {
		e, rest, more := strings.Cut(s, "/")
		if e == "" || e == "." || e == ".." {
			return false
		}
		if !more {
			return true
		}
		s = rest
	}
}

func joinPath(dir, p string) string {
	switch {
	case dir == ".":
		return p
	case p == ".":
		return dir
	}
	return dir + "/" + p
}

// parentOf returns the directory holding p ("." for top-level names).
func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "."
	}
	return p[:i]
}

// baseOf returns p's last element.
func baseOf(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// depth counts p's elements; the root has none.
func depth(p string) int {
	if p == "." {
		return 0
	}
	return strings.Count(p, "/") + 1
}
