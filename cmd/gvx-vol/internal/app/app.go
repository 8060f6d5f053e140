// Package app assembles gvx-vol's command line (urfave/cli/v2), as
// containerd's ctr does: each noun lives in its own package under
// cmd/gvx-vol/internal and exports a function making its *cli.Command
// (volcmd one per top-level verb), one file per verb.
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
// the build information for a --version that only the app level has
// (gvx-vol VERB --version is an unknown flag either way).
// Any other command line (gvx-vol --help, --version, a verb misspelt) gets
// every verb.
func New(args []string) *cli.App {
	var cs []*cli.Command
	for _, v := range verbs {
		if len(args) > 1 && args[1] == v.name {
			cs = []*cli.Command{v.make()}
			break
		}
	}
	if cs == nil {
		for _, v := range verbs {
			cs = append(cs, v.make())
		}
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

// verbs are gvx-vol's top-level commands, in help order (the nouns, then
// the volume verbs), each by the name that selects it and a function
// making it: a start builds only the verb it runs, and each App gets
// commands of its own (urfave/cli's App.Setup prefixes a top-level
// command's HelpName with the app's in place, "gvx-vol gvx-vol clone" on
// a second run; the tests call New many times). TestVerbs holds the names
// to the commands'.
var verbs = []struct {
	name string
	make func() *cli.Command
}{
	{"clone", clonecmd.Command},
	{"erofs", erofscmd.Command},
	{"build-golden", goldencmd.Command},
	{"image", imagecmd.Command},
	{"create", volcmd.Create},
	{"import", volcmd.Import},
	{"export", volcmd.Export},
	{"ls", volcmd.Ls},
	{"cat", volcmd.Cat},
	{"info", volcmd.Info},
	{"fsck", volcmd.Fsck},
	{"compact", volcmd.Compact},
}
