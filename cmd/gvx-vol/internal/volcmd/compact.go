package volcmd

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
)

// Compact returns the compact verb.
func Compact() *cli.Command {
	return &cli.Command{
		Name:      "compact",
		Usage:     "empty the journal and hand free space back to the host (before cloning a golden volume)",
		ArgsUsage: "[--shrink] [--json] FILE",
		Description: `Replays and checkpoints the journal, then punches holes (FALLOC_FL_PUNCH_HOLE)
over every free block and over the journal's log area, so the file's
allocated size tracks the blocks in use. Contents are unchanged. Reflink
clones of a compacted golden volume start small and stay small; where the
host cannot punch holes, free space is zeroed instead.

--shrink first moves everything out of the volume's tail and cuts the
volume (and the file) down to the fewest block groups that hold what is in
use plus headroom (5% and 4 MiB); inodes are not renumbered. Volumes made
by mkfs.ext4 with its defaults (resize_inode) shrink too and stay growable
online. Shrinking is an offline maintenance step: with a journal a crash
leaves the old volume or the shrunk one (at worst the journal's old blocks
allocated, which e2fsck -fy frees), so still shrink a copy and publish it
afterwards (as build-golden publishes its output).

Run it on a volume no process has open. Prints allocated sizes before and
after.

Examples:
   gvx-vol compact golden-docker.ext4
   gvx-vol compact --json golden-docker.ext4
   gvx-vol compact --shrink golden-docker.ext4`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "shrink", Usage: "also cut the volume down to its used size (moving blocks)"},
		},
		Action: oneThread(func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usage(c, "want exactly one FILE")
			}
			size := func(n int64) string {
				if n < 0 {
					return "unknown"
				}
				return cliutil.FormatSize(n)
			}
			v, err := openVolume(c.Args().First(), false)
			if err != nil {
				return err
			}
			var newSize int64 = -1
			if c.Bool("shrink") {
				if newSize, err = v.Shrink(); err != nil {
					return closeVolume(v, fmt.Errorf("shrinking: %w", err))
				}
			}
			st, err := v.Compact()
			if err = closeVolume(v, err); err != nil {
				return err
			}
			if c.Bool("json") {
				out := struct {
					*ext4lite.CompactStats
					SizeBytes int64 `json:"size_bytes,omitempty"`
				}{st, max(newSize, 0)}
				return cliutil.PrintJSON(c.App.Writer, out)
			}
			if newSize >= 0 {
				fmt.Fprintf(c.App.Writer, "%s: shrunk to %s\n", c.Args().First(), size(newSize))
			}
			how := "punched"
			if st.Zeroed {
				how = "zeroed (this host cannot punch holes)"
			}
			fmt.Fprintf(c.App.Writer, "%s: %s in use; %s of free space %s; file allocation %s -> %s\n",
				c.Args().First(), size(st.UsedBytes), size(st.PunchedBytes), how, size(st.AllocatedBefore), size(st.AllocatedAfter))
			return nil
		}),
	}
}
