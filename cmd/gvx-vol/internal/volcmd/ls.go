package volcmd

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/volcore"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list a directory of a volume",
		ArgsUsage: volcore.LsArgsUsage,
		Description: `Lists PATH (default the root) of the volume FILE without mounting it.
-l shows mode, links, owner, size (or device numbers), mtime with
nanoseconds, and symlink targets; --json prints one object per entry with
xattrs. The volume is opened read-only.

Examples:
   gvx-vol ls golden-docker.ext4
   gvx-vol ls -l golden-docker.ext4 /overlay2
   gvx-vol ls --json vol.ext4 /etc | jq -r '.[].path'`,
		Flags:  cliutil.Flags(volcore.LsFlags),
		Action: cliutil.Action(volcore.Ls),
	}
}
