package dindtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMirrorFrom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"one-line", map[string]string{
			"sources.list": "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main contrib\n",
		}, "http://m.example/debian"},
		{"one-line other suite first", map[string]string{
			"sources.list": "deb http://old.example/debian bullseye main\ndeb http://m.example/debian bookworm main\n",
		}, "http://m.example/debian"},
		{"one-line without main", map[string]string{
			"sources.list": "deb http://x.example/debian bookworm contrib\n",
		}, ""},
		{"deb822", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\n# http://snapshot.example/archive\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\nComponents: main\n",
		}, "http://m.example/debian"},
		{"deb822 disabled and src", map[string]string{
			"sources.list.d/a.sources": "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n\nEnabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/b.sources": "Types: deb\nURIs:\n http://cont.example/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://cont.example/debian"},
		{"disabled file names are ignored", map[string]string{
			"sources.list.d/x.list.disabled-by-farm": "deb http://off.example/debian bookworm main\n",
		}, ""},
		{"sources.list wins over .d", map[string]string{
			"sources.list":             "deb http://first.example/debian bookworm main\n",
			"sources.list.d/z.sources": "Types: deb\nURIs: http://second.example/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://first.example/debian"},
		{"unusable scheme", map[string]string{
			"sources.list": "deb cdrom:[Debian]/ bookworm main\ndeb https://m.example/debian bookworm main\n",
		}, "https://m.example/debian"},
		{"malformed options", map[string]string{
			"sources.list": "deb [arch=amd64 http://m.example/debian bookworm main\n",
		}, ""},
		{"nothing", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := mirrorFrom(dir, "bookworm")
			if tc.want == "" {
				if !errors.Is(err, ErrNoMirror) {
					t.Fatalf("got %q, %v; want ErrNoMirror", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestMirrorEnv(t *testing.T) {
	t.Setenv(MirrorEnv, "http://env.example/debian")
	if got, err := Mirror("bookworm"); err != nil || got != "http://env.example/debian" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// FuzzMirror feeds arbitrary apt source files to both parsers: no panic,
// and any answer is a URI with a scheme debootstrap accepts.
func FuzzMirror(f *testing.F) {
	f.Add([]byte("deb [a=b] http://m.example/debian bookworm main\n"))
	f.Add([]byte("Types: deb\nURIs: http://m.example/debian\nSuites: bookworm\nComponents: main\n"))
	f.Add([]byte("deb [ \n\n\nURIs:\n \tx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []string{mirrorOneLine(b, "bookworm"), mirrorDeb822(b, "bookworm")} {
			if m != "" && !usableURI(m) {
				t.Fatalf("unusable mirror %q", m)
			}
		}
	})
}
