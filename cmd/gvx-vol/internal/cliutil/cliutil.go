// Package cliutil holds what every gvx-vol command of the full CLI
// (urfave/cli, in gvx-vol-tools) shares: exit codes, size parsing, JSON
// output, and the bridge to the fast verbs (Flags and Action turn a
// fastflag declaration and run into a urfave/cli command's). What needs no
// CLI framework lives in clibase, which the gvx-vol binary links instead.
// It holds no storage logic.
package cliutil

import (
	"errors"
	"io"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clibase"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
	"z.gfire.dev/gvx/internal/units"
)

// ExitError carries a process exit code other than 1 (clibase.ExitError).
type ExitError = clibase.ExitError

// ExitCode maps an error returned by a command to the process exit code:
// an *ExitError's code, urfave/cli's exit code, else 1.
func ExitCode(err error) int {
	var ce cli.ExitCoder
	if !errors.As(err, new(*ExitError)) && errors.As(err, &ce) {
		return ce.ExitCode()
	}
	return clibase.ExitCode(err)
}

// ParseSize parses sizes such as "8G", "4g", "512M", "1.5T" or plain bytes
// (units.ParseSize).
func ParseSize(s string) (int64, error) { return units.ParseSize(s) }

// FormatSize renders n bytes with a binary prefix ("1.5 GiB";
// units.FormatSize).
func FormatSize(n int64) string { return units.FormatSize(n) }

// PrintJSON writes v as indented JSON followed by a newline.
func PrintJSON(w io.Writer, v any) error { return clibase.PrintJSON(w, v) }

// Usage reports a usage error (exit code 2) with the command's usage hint.
func Usage(c *cli.Context, format string, args ...any) error {
	return clibase.Usage(c.Command.HelpName, c.Command.ArgsUsage, format, args...)
}

// Flags declares a fast verb's flags (fastflag) as urfave/cli flags.
func Flags(flags []fastflag.Flag) []cli.Flag {
	var fs []cli.Flag
	for _, f := range flags {
		var aliases []string
		if f.Alias != "" {
			aliases = []string{f.Alias}
		}
		switch f.Kind {
		case fastflag.Bool:
			fs = append(fs, &cli.BoolFlag{Name: f.Name, Aliases: aliases, Usage: f.Usage, DefaultText: f.DefaultText})
		case fastflag.Int:
			fs = append(fs, &cli.IntFlag{Name: f.Name, Aliases: aliases, Usage: f.Usage, DefaultText: f.DefaultText})
		case fastflag.String:
			fs = append(fs, &cli.StringFlag{Name: f.Name, Aliases: aliases, Value: f.Default, Usage: f.Usage, DefaultText: f.DefaultText})
		}
	}
	return fs
}

// Action runs a fast verb (fastflag.RunFunc) as a urfave/cli action: the
// same function the gvx-vol binary calls, here with urfave/cli's parse.
func Action(run fastflag.RunFunc) cli.ActionFunc {
	return func(c *cli.Context) error { return run(c.App.Writer, c.Command.HelpName, c, c.Args().Slice()) }
}
