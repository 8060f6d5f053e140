package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/sink/hostdir"
)

// TestLookupExec: a command the image lacks is ExecNotFoundError (exit
// 127, Docker's words) before anything boots; one it has — through a
// merged /usr's /bin -> usr/bin, a relative or absolute symlink, a path
// relative to the working directory — is left to the Sentry, and so is
// anything a mount or an added file may provide, or that cannot be
// decided (no $PATH, a relative $PATH entry, a symlink loop).
func TestLookupExec(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/local/bin", "app", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"usr/bin/busybox", "app/run.sh", "etc/passwd"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"bin":                 "usr/bin",
		"usr/bin/sh":          "busybox",
		"usr/local/bin/abs":   "/usr/bin/busybox",
		"usr/local/bin/dang":  "/usr/bin/missing",
		"usr/local/bin/loop1": "loop2",
		"usr/local/bin/loop2": "loop1",
		"usr/local/bin/up":    "../../bin/sh",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	src := hostdir.New(root)
	env := []string{"HOME=/", "PATH=/usr/local/bin:/bin"}
	none := func(string) bool { return false }
	data := func(p string) bool { return p == "/data" || len(p) > 6 && p[:6] == "/data/" }
	for _, tc := range []struct {
		name, cwd string
		env       []string
		shadowed  func(string) bool
		missing   bool
	}{
		{name: "sh", env: env},                    // /bin -> usr/bin, sh -> busybox
		{name: "busybox", env: env},               //
		{name: "abs", env: env},                   // absolute link
		{name: "up", env: env},                    // ../../bin/sh
		{name: "/bin/sh", env: env},               //
		{name: "/usr/../bin/sh", env: env},        //
		{name: "./run.sh", cwd: "/app", env: env}, //
		{name: "loop1", env: env},                 // ELOOP: the Sentry's to say
		{name: "nope", env: env, missing: true},
		{name: "dang", env: env, missing: true},
		{name: "/bin/nope", env: env, missing: true},
		{name: "/etc/passwd/x", env: env, missing: true},
		{name: "./run.sh", cwd: "/", env: env, missing: true},
		{name: "nope", env: []string{"HOME=/"}},                            // no PATH: undecided
		{name: "nope", env: []string{"PATH=/usr/bin:bin"}},                 // relative entry
		{name: "/data/run.sh", env: env, shadowed: data},                   // on a volume
		{name: "run.sh", env: []string{"PATH=/bin:/data"}, shadowed: data}, //
	} {
		cwd := tc.cwd
		if cwd == "" {
			cwd = "/"
		}
		sh := tc.shadowed
		if sh == nil {
			sh = none
		}
		err := lookupExec(src, tc.name, tc.env, cwd, sh)
		var nf *ExecNotFoundError
		if got := errors.As(err, &nf); got != tc.missing || (err != nil && !got) {
			t.Errorf("lookupExec(%q, cwd %s, %q): %v, want missing %v", tc.name, cwd, tc.env, err, tc.missing)
			continue
		}
		if nf != nil && nf.ExitCode() != 127 {
			t.Errorf("%q: exit %d, want 127", tc.name, nf.ExitCode())
		}
	}
	if err := lookupExec(src, "nope", env, "/", none); err == nil || err.Error() != `exec: "nope": executable file not found in $PATH` {
		t.Errorf("message: %v", err)
	}
	if err := lookupExec(nil, "nope", env, "/", none); err != nil {
		t.Errorf("no image reader: %v, want undecided", err)
	}
}
