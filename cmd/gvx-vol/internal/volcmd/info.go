package volcmd

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/volcore"
)

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "show a volume's geometry, usage and features",
		ArgsUsage: volcore.InfoArgsUsage,
		Description: `Prints the volume's UUID, label, block size, used and free blocks and
inodes, features, journal, whether it was closed cleanly, and how much
space the file really takes on the host (a sparse or reflinked file takes
less than its size). The volume is opened read-only.

Examples:
   gvx-vol info golden-docker.ext4
   gvx-vol info --json ep-0042.ext4 | jq .used_bytes`,
		Flags:  cliutil.Flags(volcore.InfoFlags),
		Action: cliutil.Action(volcore.Info),
	}
}
