// Package app assembles gvx-vol's commands. Each noun or group of verbs lives
// in its own package under cmd/gvx-vol/internal and contributes its
// *cli.Command values here.
package app

import (
	"github.com/urfave/cli/v2"

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

// registry is filled by register calls in this package's other files, one
// per command group, so adding a group touches no shared list.
var registry []func() []*cli.Command

func register(f func() []*cli.Command) { registry = append(registry, f) }

func commands() []*cli.Command {
	var cs []*cli.Command
	for _, f := range registry {
		cs = append(cs, f()...)
	}
	return cs
}
