// Command gvx-vol manages gvx's storage: ext4lite volumes, reflink clones,
// EROFS images and the image cache. It never imports the runtime.
//
// This binary holds only `gvx-vol clone` (an episode's reset, which must
// start in about the time cp takes) and links nothing else: no urfave/cli,
// no other verb. Every other command line, and every clone command line
// the fast path would not parse exactly as the full CLI does (help, a flag
// error…), it hands unchanged to gvx-vol-tools beside it (package helper),
// which holds the whole CLI. docs/gvx-vol.md, "Start-up", has the numbers.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clibase"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecore"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/helper"
)

func main() {
	// One OS thread does all of a verb's volume I/O: the write order is
	// deterministic, and per-thread tools (strace's fault injection counts
	// per thread) can target the Nth write of a run.
	runtime.LockOSThread()
	if len(os.Args) > 1 && os.Args[1] == "clone" {
		if req, ok := clonecore.Parse(os.Args[2:]); ok {
			// The help name the full CLI gives the verb (urfave/cli names
			// the app after argv[0]).
			helpName := filepath.Base(os.Args[0]) + " clone"
			if err := clonecore.Run(os.Stdout, helpName, req); err != nil {
				fmt.Fprintln(os.Stderr, "gvx-vol:", err)
				os.Exit(clibase.ExitCode(err))
			}
			return
		}
	}
	err := helper.Exec(os.Args)
	fmt.Fprintln(os.Stderr, "gvx-vol:", err)
	os.Exit(1)
}
