package cliconv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp() (*cli.App, *bytes.Buffer) {
	var out bytes.Buffer
	a := &cli.App{
		Name:      "tool",
		Writer:    &out,
		ErrWriter: &out,
		Commands: []*cli.Command{{
			Name:        "verb",
			Flags:       []cli.Flag{&cli.IntFlag{Name: "n"}},
			Action:      func(*cli.Context) error { return nil },
			Subcommands: []*cli.Command{{Name: "sub", Flags: []cli.Flag{&cli.IntFlag{Name: "k"}}, Action: func(*cli.Context) error { return nil }}},
		}},
	}
	Apply(a)
	return a, &out
}

// TestUsageErrorsExit2: an unknown flag (on the app, a verb, a sub-verb),
// a bad flag value and an unknown verb all exit with status 2 and name the
// --help to read.
func TestUsageErrorsExit2(t *testing.T) {
	exited := -1
	old := cli.OsExiter
	cli.OsExiter = func(code int) { exited = code }
	defer func() { cli.OsExiter = old }()
	for _, args := range [][]string{
		{"tool", "--bogus"},
		{"tool", "verb", "--bogus"},
		{"tool", "verb", "--n", "x"},
		{"tool", "verb", "sub", "--bogus"},
		{"tool", "nosuchverb"},
	} {
		exited = -1
		a, out := testApp()
		err := a.Run(args)
		code := exited
		if ec, ok := err.(cli.ExitCoder); ok {
			code = ec.ExitCode()
		}
		if code != UsageExit {
			t.Errorf("%v: exit %d (err %v), want %d", args, code, err, UsageExit)
		}
		msg := out.String()
		if err != nil {
			msg += err.Error()
		}
		if !strings.Contains(msg, "--help") {
			t.Errorf("%v: %q does not point at --help", args, msg)
		}
	}
}

func TestVersion(t *testing.T) {
	a, out := testApp()
	if err := a.Run([]string{"tool", "--version"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "tool ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("--version printed %q", out.String())
	}
}

// TestVersionHidden: an app built with HideVersion (gvx-vol's app of one
// verb) keeps it: no version is read from the build information and
// --version is an unknown flag there (exit 2), while the verb still runs
// and its usage errors still exit 2.
func TestVersionHidden(t *testing.T) {
	exited := -1
	old := cli.OsExiter
	cli.OsExiter = func(code int) { exited = code }
	defer func() { cli.OsExiter = old }()
	var out bytes.Buffer
	a := &cli.App{Name: "tool", HideVersion: true, Writer: &out, ErrWriter: &out,
		Commands: []*cli.Command{{Name: "verb", Flags: []cli.Flag{&cli.IntFlag{Name: "n"}}, Action: func(*cli.Context) error { return nil }}}}
	Apply(a)
	if a.Version != "" || !a.HideVersion {
		t.Fatalf("Apply on a HideVersion app: Version %q, HideVersion %v", a.Version, a.HideVersion)
	}
	if err := a.Run([]string{"tool", "verb", "--n", "1"}); err != nil {
		t.Fatalf("tool verb --n 1: %v", err)
	}
	err := a.Run([]string{"tool", "--version"})
	if ec, ok := err.(cli.ExitCoder); !ok || ec.ExitCode() != UsageExit {
		t.Fatalf("tool --version on a HideVersion app: %v (exit %d), want a usage error\n%s", err, exited, out.String())
	}
}
