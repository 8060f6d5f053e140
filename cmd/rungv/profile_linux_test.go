package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --profile-dir (RUNGV_PROFILE_DIR): the Sentry's Go CPU profile over the
// episode's life lands in DIR/<episode id>.cpu.pprof in both isolation
// modes, as root and as nobody; it is gVisor's Sentry's (its functions are
// in it), not rungv's host side; a directory the caller cannot write is a
// clear error, not an episode without its profile.

// TestProfileDirBothModes: the profile is there, gzip'd pprof, and names
// the Sentry's code.
func TestProfileDirBothModes(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		isolations(t, u, func(t *testing.T, iso string) {
			tmp := privateTmp(t, u)
			dir := privateTmp(t, u) // u's, outside TMPDIR (checkClean)
			// The guest works for a while: the profiler samples every 10 ms.
			r := runRungv(t, u, tmp, "", "run", "--isolation", iso, "--network", "none", "--profile-dir", dir, imageRef,
				"sh", "-c", "i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done; echo done")
			if r.code != 0 || r.stdout != "done\n" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			got, _ := filepath.Glob(filepath.Join(dir, "*.cpu.pprof"))
			if len(got) != 1 {
				ents, _ := os.ReadDir(dir)
				t.Fatalf("want one *.cpu.pprof in %s, got %v (dir holds %v)", dir, got, ents)
			}
			f, err := os.Open(got[0])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatalf("%s is not a pprof profile (gzip): %v", got[0], err)
			}
			b, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("%s: %v", got[0], err)
			}
			if !bytes.Contains(b, []byte("gvisor.dev/gvisor/pkg/sentry/")) {
				t.Fatalf("%s (%d bytes) names none of the Sentry's functions", got[0], len(b))
			}
			checkClean(t, tmp)
		})
	})
}

// TestProfileDirUnwritable: a profile directory the caller cannot write
// fails the start with an error naming it, in the seccomp-only mode where
// rungv opens the file (in the namespaced one runsc does, and says so).
func TestProfileDirUnwritable(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the directory is root's, the caller nobody")
	}
	need(t, asNobody)
	u := asNobody
	tmp := privateTmp(t, u)
	dir := t.TempDir() // root's, 0700 under a 0700 parent: nobody cannot write it
	r := runRungv(t, u, tmp, "", "run", "--isolation", "seccomp-only", "--network", "none", "--profile-dir", dir, imageRef, "echo", "ran")
	if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "RUNGV_PROFILE_DIR") || !strings.Contains(r.stderr, dir) {
		t.Fatalf("exit %d stdout %q stderr %q; want a failed start naming %s and RUNGV_PROFILE_DIR", r.code, r.stdout, r.stderr, dir)
	}
	checkClean(t, tmp)
}

// TestProfileDirOthersCanWrite: a profile directory another user can write
// (where they could plant a symlink named like the profile, which runsc
// would follow and truncate) is refused before anything starts, in both
// isolation modes, and nothing is written into it.
func TestProfileDirOthersCanWrite(t *testing.T) {
	need(t, asRoot)
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o1777); err != nil { // /tmp's mode: anyone may add a name
			t.Fatal(err)
		}
		r := runRungv(t, asRoot, tmp, "", "run", "--isolation", iso, "--network", "none", "--profile-dir", dir, imageRef, "echo", "ran")
		if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, dir) || !strings.Contains(r.stderr, "nobody else can write") {
			t.Fatalf("exit %d stdout %q stderr %q; want a refusal naming %s", r.code, r.stdout, r.stderr, dir)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%s holds %v after the refusal", dir, ents)
		}
		checkClean(t, tmp)
	})
}
