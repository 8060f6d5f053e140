package volcmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/internal/units"
)

// Info returns the info verb.
func Info() *cli.Command {
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
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print as JSON"}},
		Action: info,
	}
}

// info prints the geometry, usage, features and host allocation of the
// volume FILE, opened read-only.
func info(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage(c, "want exactly one FILE")
	}
	w, path := c.App.Writer, c.Args().First()
	v, err := openVolume(path, true)
	if err != nil {
		return err
	}
	vi, err := v.Info()
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
	}{vi, path, fi.Size(), int64(vi.Blocks-vi.FreeBlocks) * int64(vi.BlockSize), allocatedBytes(fi)}
	if c.Bool("json") {
		return cliutil.PrintJSON(w, out)
	}
	fmt.Fprintf(w, "file:        %s\n", path)
	fmt.Fprintf(w, "uuid:        %s\n", vi.UUID)
	if vi.Label != "" {
		fmt.Fprintf(w, "label:       %s\n", vi.Label)
	}
	fmt.Fprintf(w, "size:        %s (%d blocks of %d bytes, %d groups)\n", units.FormatSize(int64(vi.Blocks)*int64(vi.BlockSize)), vi.Blocks, vi.BlockSize, vi.Groups)
	fmt.Fprintf(w, "used:        %s (%d blocks free)\n", units.FormatSize(out.UsedBytes), vi.FreeBlocks)
	if out.AllocatedBytes >= 0 {
		fmt.Fprintf(w, "on host:     %s allocated\n", units.FormatSize(out.AllocatedBytes))
	}
	fmt.Fprintf(w, "inodes:      %d used of %d (%d bytes each)\n", vi.Inodes-vi.FreeInodes, vi.Inodes, vi.InodeSize)
	fmt.Fprintf(w, "features:    %s\n", strings.Join(vi.Features, " "))
	if vi.Journal {
		fmt.Fprintf(w, "journal:     %s\n", units.FormatSize(int64(vi.JournalSize)))
	}
	state := "clean"
	switch {
	case vi.Truncated:
		state = fmt.Sprintf("truncated: the file holds %s of the filesystem's %s (run gvx-vol fsck)",
			units.FormatSize(out.SizeBytes), units.FormatSize(int64(vi.Blocks)*int64(vi.BlockSize)))
	case vi.JournalAborted != "":
		state = "journal replay stopped at a corrupt transaction, discarded with the ones after it: " + vi.JournalAborted + " (run gvx-vol fsck)"
	case !vi.Clean:
		state = "not cleanly closed (run gvx-vol fsck)"
	}
	fmt.Fprintf(w, "state:       %s\n", state)
	return nil
}
