// Package clibase holds what gvx-vol's commands share that needs no CLI
// framework: the exit-status error, usage errors and JSON output. It must
// not import urfave/cli (or anything heavy): gvx-vol's fast clone path
// (package clonecore) links it, and every package linked there costs each
// clone its initialisation (docs/gvx-vol.md, "Start-up"). Package cliutil
// builds the urfave/cli-facing helpers on top of it.
package clibase

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// UsageExit is the exit status of a usage error (as cliconv.UsageExit).
const UsageExit = 2

// ExitError carries a process exit code other than 1 (for example fsck's
// "findings" code).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode maps an error to the process exit code: an *ExitError's code,
// else 1. (cliutil.ExitCode also knows urfave/cli's exit errors.)
func ExitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// Usage reports a usage error (exit status UsageExit): the message, then
// "usage: HELPNAME ARGSUSAGE" (for example "gvx-vol clone SRC DST").
func Usage(helpName, argsUsage, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &ExitError{Code: UsageExit, Err: fmt.Errorf("%s\nusage: %s %s", msg, helpName, argsUsage)}
}

// PrintJSON writes v as indented JSON followed by a newline.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
