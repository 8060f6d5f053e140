package volcmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
)

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "show a volume's geometry, usage and features",
		ArgsUsage: "[--json] FILE",
		Description: `Prints the volume's UUID, label, block size, used and free blocks and
inodes, features, journal, whether it was closed cleanly, and how much
space the file really takes on the host (a sparse or reflinked file takes
less than its size). The volume is opened read-only.

Examples:
   gvx-vol info golden-docker.ext4
   gvx-vol info --json ep-0042.ext4 | jq .used_bytes`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print as JSON"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usage(c, "want exactly one FILE")
			}
			path := c.Args().First()
			v, err := openVolume(path, true)
			if err != nil {
				return err
			}
			info, err := v.Info()
			v.Close()
			if err != nil {
				return err
			}
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			out := struct {
				*ext4lite.Info
				File           string `json:"file"`
				SizeBytes      int64  `json:"size_bytes"`
				UsedBytes      int64  `json:"used_bytes"`
				AllocatedBytes int64  `json:"allocated_bytes"`
			}{info, path, fi.Size(), int64(info.Blocks-info.FreeBlocks) * int64(info.BlockSize), allocatedBytes(fi)}
			if c.Bool("json") {
				return cliutil.PrintJSON(c.App.Writer, out)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "file:        %s\n", path)
			fmt.Fprintf(w, "uuid:        %s\n", info.UUID)
			if info.Label != "" {
				fmt.Fprintf(w, "label:       %s\n", info.Label)
			}
			fmt.Fprintf(w, "size:        %s (%d blocks of %d bytes, %d groups)\n", cliutil.FormatSize(int64(info.Blocks)*int64(info.BlockSize)), info.Blocks, info.BlockSize, info.Groups)
			fmt.Fprintf(w, "used:        %s (%d blocks free)\n", cliutil.FormatSize(out.UsedBytes), info.FreeBlocks)
			if out.AllocatedBytes >= 0 {
				fmt.Fprintf(w, "on host:     %s allocated\n", cliutil.FormatSize(out.AllocatedBytes))
			}
			fmt.Fprintf(w, "inodes:      %d used of %d (%d bytes each)\n", info.Inodes-info.FreeInodes, info.Inodes, info.InodeSize)
			fmt.Fprintf(w, "features:    %s\n", strings.Join(info.Features, " "))
			if info.Journal {
				fmt.Fprintf(w, "journal:     %s\n", cliutil.FormatSize(int64(info.JournalSize)))
			}
			state := "clean"
			switch {
			case info.Truncated:
				state = fmt.Sprintf("truncated: the file holds %s of the filesystem's %s (run gvx-vol fsck)",
					cliutil.FormatSize(out.SizeBytes), cliutil.FormatSize(int64(info.Blocks)*int64(info.BlockSize)))
			case info.JournalAborted != "":
				state = "journal replay stopped at a corrupt transaction, discarded with the ones after it: " + info.JournalAborted + " (run gvx-vol fsck)"
			case !info.Clean:
				state = "not cleanly closed (run gvx-vol fsck)"
			}
			fmt.Fprintf(w, "state:       %s\n", state)
			return nil
		},
	}
}
