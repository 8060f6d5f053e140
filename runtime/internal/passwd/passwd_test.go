package passwd

import (
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

func etc(t testing.TB, passwd, group string) sink.Source {
	m := sinktest.NewMemFS()
	if err := m.Mkdir(&sink.Header{Path: "etc", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"etc/passwd": passwd, "etc/group": group} {
		if err := m.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// FuzzResolve: /etc/passwd and /etc/group come from untrusted images.
func FuzzResolve(f *testing.F) {
	f.Add("root:x:0:0::/root:/bin/sh\n", "root:x:0:\nwheel:x:10:root\n", "root")
	f.Add("a:b:c:d:e:f:g\n:::::::\n", "::::\n", "a:b")
	f.Fuzz(func(t *testing.T, passwd, group, spec string) {
		u, err := Resolve(etc(t, passwd, group), spec)
		if err == nil && len(u.Groups) == 0 {
			t.Fatalf("%q resolved without groups", spec)
		}
	})
}
