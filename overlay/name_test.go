package overlay

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCleanName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a", "a"},
		{"a/b/c", "a/b/c"},
		{"./a/b", "a/b"},
		{"./a/b/", "a/b"},
		{"a/b/", "a/b"},
		{"/a/b", "a/b"},
		{"//a//b//", "a/b"},
		{"./", "."},
		{".", "."},
		{"", "."},
		{"/", "."},
		{"././a/./b/.", "a/b"},
		{"a/.b/..c/...", "a/.b/..c/..."},
		{"./.wh..wh..opq", ".wh..wh..opq"},
	} {
		got, err := cleanName(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"..", "../a", "a/..", "a/../b", "./../a", "a/b/../", "a\x00b"} {
		if got, err := cleanName(bad); err == nil {
			t.Errorf("cleanName(%q) = %q, want an error", bad, got)
		} else if !errors.Is(err, ErrUnsafePath) && !errors.Is(err, ErrCorrupt) {
			t.Errorf("cleanName(%q): %v, want ErrUnsafePath or ErrCorrupt", bad, err)
		}
	}
}

// FuzzCleanName checks cleanName against its definition: the name's
// elements without the empty and "." ones, joined; refused if one is "..".
func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a", "./a/b/", "//a//b", "a/../b", ".", "", "./", "a/./b", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := cleanName(name)
		var want []string
		dotdot := false
		for _, e := range strings.Split(name, "/") {
			switch e {
			case "", ".":
			case "..":
				dotdot = true
			default:
				want = append(want, e)
			}
		}
		switch {
		case strings.IndexByte(name, 0) >= 0 || dotdot:
			if err == nil {
				t.Fatalf("cleanName(%q) = %q, want an error", name, got)
			}
		case err != nil:
			t.Fatalf("cleanName(%q): %v", name, err)
		case len(want) == 0:
			if got != "." {
				t.Fatalf("cleanName(%q) = %q, want .", name, got)
			}
		case !slices.Equal(strings.Split(got, "/"), want):
			t.Fatalf("cleanName(%q) = %q, want %q", name, got, strings.Join(want, "/"))
		}
	})
}
