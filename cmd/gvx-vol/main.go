// Command gvx-vol manages gvx's storage: ext4lite volumes, reflink clones,
// EROFS images and the image cache. Its verbs live in the packages under
// internal (package app assembles them); it never imports the runtime
// (gVisor). docs/gvx-vol.md is its guide.
package main

import (
	"fmt"
	"os"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/app"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/internal/termsafe"
)

func main() {
	if err := app.New(os.Args).Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "gvx-vol:", termsafe.Message(err.Error()))
		os.Exit(cliutil.ExitCode(err))
	}
}
