// Package cliconv holds the conventions gvx's command lines share
// (urfave/cli/v2): --version from the binary's build information, and exit
// status 2 for every usage error (an unknown flag, verb or a bad value
// urfave/cli itself reports), with a pointer to the --help that teaches.
// Library packages never import it.
package cliconv

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// UsageExit is the exit status of a usage error.
const UsageExit = 2

// Revision is the VCS revision of a binary built where Go cannot record
// one (a git worktree, -buildvcs=false, a tarball): set it with
// -ldflags "-X z.gfire.dev/gvx/internal/cliconv.Revision=$(git describe
// --always --dirty)". The build information's vcs.revision wins.
var Revision string

// Version describes the binary: its VCS revision, abbreviated, with
// "(modified)" when the checkout had uncommitted changes (from the build
// information go build records in a checkout, else Revision, else its
// module version, else "(devel)"), the Go version and the versions of
// the named dependencies, e.g. "gvisor.dev/gvisor":
// "0c94c09 (modified), go1.26.8, gvisor.dev/gvisor v0.0.0-…".
func Version(deps ...string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return version(bi, Revision, deps...)
}

// version is Version for build information bi and an -X revision.
func version(bi *debug.BuildInfo, xrev string, deps ...string) string {
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	var out string
	switch {
	case rev != "":
		out = rev[:min(len(rev), 7)] + modified
	case xrev != "":
		out = xrev
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		out = bi.Main.Version
	default:
		out = "(devel)"
	}
	out += ", " + bi.GoVersion
	for _, d := range deps {
		for _, m := range bi.Deps {
			if m.Path == d {
				out += ", " + d + " " + m.Version
			}
		}
	}
	return out
}

// HelpWidth is where help text wraps.
const HelpWidth = 80

// Apply gives app the shared conventions: a --version flag printing
// Version(deps...) (unless app.HideVersion: then the build information is
// not read either), usage errors (on the app and every command below it,
// and unknown verbs) that exit with UsageExit, and help wrapped at
// HelpWidth columns.
func Apply(app *cli.App, deps ...string) {
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		// Each flag's names on a line of their own and its usage wrapped
		// below them: a table with a column for the names would be as wide
		// as the longest of them.
		for _, t := range []string{`{{template "visibleFlagCategoryTemplate" .}}`, `{{template "visibleFlagTemplate" .}}`} {
			templ = strings.ReplaceAll(templ, t, `{{flagsHelp .VisibleFlags}}`)
		}
		cli.HelpPrinterCustom(w, templ, data, map[string]any{
			"wrapAt":    func() int { return HelpWidth },
			"flagsHelp": flagsHelp,
		})
	}
	if !app.HideVersion {
		app.Version = Version(deps...)
	}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, c.App.Version) }
	app.OnUsageError = usageError(app.Name)
	app.CommandNotFound = func(c *cli.Context, verb string) {
		fmt.Fprintf(c.App.ErrWriter, "%s: unknown command %q (see %s --help)\n", app.Name, verb, app.Name)
		cli.OsExiter(UsageExit)
	}
	var walk func(prefix string, cs []*cli.Command)
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			name := prefix + " " + c.Name
			c.OnUsageError = usageError(name)
			walk(name, c.Subcommands)
		}
	}
	walk(app.Name, app.Commands)
}

func usageError(name string) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, _ bool) error {
		msg := strings.TrimSpace(err.Error())
		return cli.Exit(fmt.Sprintf("%s: %s (see %s --help)", name, msg, name), UsageExit)
	}
}

// flagsHelp renders flags as "   NAMES" lines, each followed by its usage
// wrapped at HelpWidth and indented.
func flagsHelp(flags []cli.Flag) string {
	var b strings.Builder
	for _, f := range flags {
		names, usage, _ := strings.Cut(f.String(), "\t")
		b.WriteString("\n   " + names)
		line := "       "
		for _, w := range strings.Fields(usage) {
			if len(line)+1+len(w) > HelpWidth && strings.TrimSpace(line) != "" {
				b.WriteString("\n" + line)
				line = "       "
			}
			line += " " + w
		}
		if strings.TrimSpace(line) != "" {
			b.WriteString("\n" + line)
		}
	}
	return b.String()
}
