// Package app assembles gvx-vol's command line (urfave/cli/v2), as
// containerd's ctr does: each noun lives in its own package under
// cmd/gvx-vol/internal and exports its *cli.Command (volcmd its top-level
// verbs), one file per verb.
package app

import (
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/erofscmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/goldencmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/imagecmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/volcmd"
	"z.gfire.dev/gvx/internal/cliconv"
)

// New returns the gvx-vol application for the command line args
// (os.Args; nil for every verb). When args[1] names a verb, the app holds
// that verb alone: urfave/cli still parses its flags, prints its help and
// reports its usage errors, but a start (a clone's, ~3 ms all told) does
// not build and set up the other eleven verbs' flags and help, nor read
// the build information for a --version that only the app level has.
// Any other command line (gvx-vol --help, --version, a verb misspelt) gets
// every verb.
func New(args []string) *cli.App {
	cs := commands()
	if one := named(cs, args); one != nil {
		cs = []*cli.Command{one}
	}
	a := &cli.App{
		Name:                 "gvx-vol",
		Usage:                "ext4lite volumes, reflink clones and EROFS image caches for gvx episodes",
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		HideVersion:          len(cs) == 1,
		Commands:             cs,
		// Set, so that App.Setup does not stat os.Args[0] for it: no help
		// template of gvx-vol prints it.
		Compiled: time.Unix(0, 0).UTC(),
		Description: `Every gvx episode keeps its whole /var/lib/docker in ONE regular file holding
an ext4 filesystem (an ext4lite volume). gvx-vol creates, inspects, fills and
checks such volumes without mounting anything, and clones golden volumes in
O(1) on reflink filesystems.

Examples:
   gvx-vol create --size 8G vol.ext4
   gvx-vol import vol.ext4 rootfs.tar
   gvx-vol ls -l vol.ext4 /
   gvx-vol fsck vol.ext4

Exit status: 0 success; 2 a usage error; fsck: 4 findings, 8 could not check.`,
	}
	cliconv.Apply(a)
	return a
}

// commands are gvx-vol's top-level commands, in help order (the nouns,
// then the volume verbs), each made anew: urfave/cli's App.Setup prefixes
// a top-level command's HelpName with the app's in place ("gvx-vol gvx-vol
// clone" on a second run), so each App gets commands of its own (the tests
// call New many times).
func commands() []*cli.Command {
	return append([]*cli.Command{clonecmd.Command(), erofscmd.Command(), goldencmd.Command(), imagecmd.Command()},
		volcmd.Commands()...)
}

// named is the command of cs that args[1] names (by name or alias), or nil.
func named(cs []*cli.Command, args []string) *cli.Command {
	if len(args) < 2 {
		return nil
	}
	for _, c := range cs {
		if c.HasName(args[1]) {
			return c
		}
	}
	return nil
}
