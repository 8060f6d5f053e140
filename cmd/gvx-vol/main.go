// Command gvx-vol manages gvx's storage: ext4lite volumes, reflink clones,
// EROFS images and the image cache. It never imports the runtime, so it
// starts in milliseconds (clone is an episode's reset).
package main

import (
	"fmt"
	"os"
	"runtime"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/app"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

func main() {
	// One OS thread does all of a verb's volume I/O: the write order is
	// deterministic, and per-thread tools (strace's fault injection counts
	// per thread) can target the Nth write of a run.
	runtime.LockOSThread()
	if err := app.New().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gvx-vol:", err)
		os.Exit(cliutil.ExitCode(err))
	}
}
