// Package app is rungv's command line (urfave/cli/v2).
package app

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/poolcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/runcmd"
)

// Main runs the CLI with args and exits.
func Main(args []string) {
	a := &cli.App{
		Name:                      "rungv",
		Usage:                     "run an OCI image as one isolated gVisor episode",
		HideVersion:               true,
		DisableSliceFlagSeparator: true,
		Commands:                  []*cli.Command{runcmd.Command, poolcmd.Command},
	}
	if err := a.Run(args); err != nil {
		fmt.Fprintln(os.Stderr, "rungv:", err)
		os.Exit(125)
	}
}
