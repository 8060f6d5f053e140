// Package cliutil holds what every gvx-vol command shares: exit codes,
// usage errors, size parsing, JSON output and the progress line. It holds
// no storage logic.
package cliutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/internal/cliconv"
	"z.gfire.dev/gvx/internal/units"
)

// ExitError carries a process exit code other than 1 (for example fsck's
// "findings" code).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by a command to the process exit code:
// an *ExitError's code, urfave/cli's exit code, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) {
		return ce.ExitCode()
	}
	return 1
}

// ParseSize parses sizes such as "8G", "4g", "512M", "1.5T" or plain bytes
// (units.ParseSize).
func ParseSize(s string) (int64, error) { return units.ParseSize(s) }

// FormatSize renders n bytes with a binary prefix ("1.5 GiB";
// units.FormatSize).
func FormatSize(n int64) string { return units.FormatSize(n) }

// PrintJSON writes v as indented JSON followed by a newline.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Usage reports a usage error (exit status cliconv.UsageExit): the
// message, then "usage: HELPNAME ARGSUSAGE" (for example "usage: gvx-vol
// clone SRC DST").
func Usage(c *cli.Context, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &ExitError{Code: cliconv.UsageExit, Err: fmt.Errorf("%s\nusage: %s %s", msg, c.Command.HelpName, c.Command.ArgsUsage)}
}
