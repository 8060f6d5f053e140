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

// Version describes the binary: its module version and VCS revision (from
// the build information Go records), and the versions of the named
// dependencies, e.g. "gvisor.dev/gvisor".
func Version(deps ...string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		case "vcs.time":
			at = s.Value
		}
	}
	out := v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " (" + rev + modified
		if at != "" {
			out += ", " + at
		}
		out += ")"
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
// Version(deps...), usage errors (on the app and every command below it,
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
	app.HideVersion = false
	app.Version = Version(deps...)
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
