// Command gvx-vol manages gvx's storage: ext4lite volumes, reflink clones,
// EROFS images and the image cache. It never imports the runtime.
//
// This binary answers only the fast verbs itself: `gvx-vol clone` (an
// episode's reset, which must start in about the time cp takes), `info`
// and `ls`; it links nothing else: no urfave/cli, no other verb. Every
// other command line, and every fast-verb command line it would not parse
// exactly as the full CLI does (help, a flag error…; package fastflag), it
// hands unchanged to gvx-vol-tools beside it (package helper), which holds
// the whole CLI. docs/gvx-vol.md, "Start-up", has the numbers.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clibase"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecore"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/helper"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/volcore"
	"z.gfire.dev/gvx/internal/termsafe"
)

// fast are the verbs this binary answers: each one's flags and run, the
// same the full CLI declares and calls.
var fast = map[string]struct {
	flags []fastflag.Flag
	run   fastflag.RunFunc
}{
	"clone": {clonecore.Flags, clonecore.Run},
	"info":  {volcore.InfoFlags, volcore.Info},
	"ls":    {volcore.LsFlags, volcore.Ls},
}

func main() {
	// No runtime.LockOSThread here, unlike gvx-vol-tools (whose import and
	// create must write from one thread, for strace's per-thread fault
	// injection): a locked main thread makes the runtime start a template
	// thread for every new one, a thread creation more in a clone that
	// takes about two milliseconds in all, and these verbs write at most
	// one file.
	if len(os.Args) > 1 {
		verb := os.Args[1]
		if v, ok := fast[verb]; ok {
			if vals, ok := fastflag.Parse(v.flags, os.Args[2:]); ok {
				// The help name the full CLI gives the verb (urfave/cli
				// names the app after argv[0]).
				helpName := filepath.Base(os.Args[0]) + " " + verb
				if err := v.run(os.Stdout, helpName, vals, vals.Args); err != nil {
					fmt.Fprintln(os.Stderr, "gvx-vol:", termsafe.Message(err.Error()))
					os.Exit(clibase.ExitCode(err))
				}
				return
			}
		}
	}
	err := helper.Exec(os.Args)
	fmt.Fprintln(os.Stderr, "gvx-vol:", termsafe.Message(err.Error()))
	os.Exit(1)
}
