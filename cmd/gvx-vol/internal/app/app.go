// Package app assembles gvx-vol's command line (urfave/cli/v2), as
// containerd's ctr does: each noun lives in its own package under
// cmd/gvx-vol/internal and exports its *cli.Command (volcmd its top-level
// verbs), one file per verb.
package app

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clonecmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/erofscmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/goldencmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/imagecmd"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/volcmd"
	"z.gfire.dev/gvx/internal/cliconv"
)

// New returns the gvx-vol application.
func New() *cli.App {
	a := &cli.App{
		Name:                 "gvx-vol",
		Usage:                "ext4lite volumes, reflink clones and EROFS image caches for gvx episodes",
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Commands:             commands(),
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

// commands are gvx-vol's top-level commands, in help order (the nouns, then
// the volume verbs). Each is a copy:
// urfave/cli's App.Setup prefixes a top-level command's HelpName with the
// app's in place ("gvx-vol gvx-vol clone" on a second run), so an App of
// its own per copy lets New be called again (the tests run many).
func commands() []*cli.Command {
	var cs []*cli.Command
	nouns := []*cli.Command{clonecmd.Command, erofscmd.Command, goldencmd.Command, imagecmd.Command}
	for _, c := range append(nouns, volcmd.Commands...) {
		c := *c
		cs = append(cs, &c)
	}
	return cs
}
