// Command gvx-vol-tools is the full gvx-vol command line (every verb, its
// help, completion and --version), run by the gvx-vol binary for all but
// its clone fast path (package helper). Users run gvx-vol, never this
// binary directly: it must lie beside gvx-vol, and it names itself after
// argv[0], which gvx-vol passes on unchanged. It never imports the
// runtime (gVisor).
package main

import (
	"fmt"
	"os"
	"runtime"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/app"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/internal/termsafe"
)

func main() {
	// One OS thread does all of a verb's volume I/O: the write order is
	// deterministic, and per-thread tools (strace's fault injection counts
	// per thread) can target the Nth write of a run.
	runtime.LockOSThread()
	if err := app.New().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gvx-vol:", termsafe.Message(err.Error()))
		os.Exit(cliutil.ExitCode(err))
	}
}
