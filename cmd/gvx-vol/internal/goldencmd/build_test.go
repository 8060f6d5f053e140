package goldencmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// runCLI runs "gvx-vol build-golden ARGS..." in-process and returns its
// stdout, stderr and error.
func runCLI(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	app := &cli.App{Name: "gvx-vol", Commands: []*cli.Command{buildCommand()}, Writer: &out, ErrWriter: &errb,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"gvx-vol", "build-golden"}, args...))
	return out.String(), errb.String(), err
}

// TestUsageErrors: what cannot be built from is a usage error (exit 2)
// naming the flag, found before anything is created or run; an existing
// OUT names --force.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "golden.ext4")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "want exactly one OUT file"},
		{[]string{"--size", "lots", out}, "--size: "},
		{[]string{"--daemon-pull", "sometimes", out}, "--daemon-pull: "},
		{[]string{"--platform", "linux", out}, `platform "linux"`},
		{[]string{"--pull", "Bad:Ref!", out}, `pull "Bad:Ref!": not an image reference`},
		{[]string{"--pull", "busybox@sha256:" + strings.Repeat("a", 64), out}, "name a tag with the digest"},
	} {
		_, _, err := runCLI(c.args...)
		if err == nil || cliutil.ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v (exit %d), want exit 2 and %q", c.args, err, cliutil.ExitCode(err), c.want)
		}
	}
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI("--rungv", "/nonexistent/rungv", out); err == nil || cliutil.ExitCode(err) != 1 || !strings.Contains(err.Error(), "--force") {
		t.Errorf("existing OUT: %v (exit %d)", err, cliutil.ExitCode(err))
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("left behind: %v", names)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Error("existing OUT changed")
	}
}
