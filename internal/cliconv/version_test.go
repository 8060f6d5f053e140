package cliconv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFormat(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Deps: []*debug.Module{{Path: "gvisor.dev/gvisor", Version: "v0.0.0-x"}}}
	for _, tc := range []struct {
		settings []debug.BuildSetting
		xrev     string
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0c94c09abcdef0123"}, {Key: "vcs.modified", Value: "true"}}, "", "0c94c09 (modified), go1.26.8"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0c94c09abcdef0123"}, {Key: "vcs.modified", Value: "false"}}, "zzz", "0c94c09, go1.26.8"},
		{nil, "0c94c09-dirty", "0c94c09-dirty, go1.26.8"},
		{nil, "", "(devel), go1.26.8"},
	} {
		bi.Settings = tc.settings
		if got := version(bi, tc.xrev); got != tc.want {
			t.Errorf("version(%v, %q) = %q, want %q", tc.settings, tc.xrev, got, tc.want)
		}
	}
	if got := version(bi, "", "gvisor.dev/gvisor"); got != "(devel), go1.26.8, gvisor.dev/gvisor v0.0.0-x" {
		t.Errorf("with deps: %q", got)
	}
}

// TestVersionBuilt builds gvx-vol (both its binaries) and rungv in this
// checkout with go build, as README does, and runs --version: each names
// the checkout's revision. In a plain clone go build records it
// (vcs.revision); in a git worktree, where go cannot, the build passes it
// with -ldflags -X (Revision).
func TestVersionBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries (minutes for rungv)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): no revision to find", err)
	}
	rev := strings.TrimSpace(string(out))[:7]
	bin := t.TempDir()
	args := []string{"build", "-buildvcs=true", "-o", bin + "/"}
	if st, err := os.Stat(filepath.Join(root, ".git")); err != nil || !st.IsDir() {
		// A worktree: go build records no VCS information there.
		args = []string{"build", "-buildvcs=false", "-ldflags", "-X z.gfire.dev/gvx/internal/cliconv.Revision=" + rev, "-o", bin + "/"}
	}
	build := exec.Command("go", append(args, "./cmd/gvx-vol/...", "./cmd/rungv")...)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}
	for _, name := range []string{"gvx-vol", "gvx-vol-tools", "rungv"} {
		b, err := exec.Command(filepath.Join(bin, name), "--version").CombinedOutput()
		name = strings.TrimSuffix(name, "-tools") // gvx-vol's helper answers as gvx-vol
		if err != nil {
			t.Errorf("%s --version: %v %s", name, err, b)
			continue
		}
		if got := string(b); !strings.HasPrefix(got, name+" "+rev) || !strings.Contains(got, ", go1.") {
			t.Errorf("%s --version = %q, want %q…", name, got, name+" "+rev)
		}
	}
}
