package volcore

import (
	"fmt"
	"io"
	"os"
	"strings"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/clibase"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/fastflag"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/internal/units"
)

// InfoArgsUsage is the info verb's argument synopsis.
const InfoArgsUsage = "[--json] FILE"

// InfoFlags are info's flags.
var InfoFlags = []fastflag.Flag{{Name: "json", Kind: fastflag.Bool, Usage: "print as JSON"}}

// Info runs the info verb (a fastflag.RunFunc): geometry, usage, features
// and host allocation of the volume FILE, opened read-only.
func Info(w io.Writer, helpName string, f fastflag.Flagger, args []string) error {
	if len(args) != 1 {
		return clibase.Usage(helpName, InfoArgsUsage, "want exactly one FILE")
	}
	path := args[0]
	v, err := OpenVolume(path, true)
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
	if f.Bool("json") {
		return clibase.PrintJSON(w, out)
	}
	fmt.Fprintf(w, "file:        %s\n", path)
	fmt.Fprintf(w, "uuid:        %s\n", info.UUID)
	if info.Label != "" {
		fmt.Fprintf(w, "label:       %s\n", info.Label)
	}
	fmt.Fprintf(w, "size:        %s (%d blocks of %d bytes, %d groups)\n", units.FormatSize(int64(info.Blocks)*int64(info.BlockSize)), info.Blocks, info.BlockSize, info.Groups)
	fmt.Fprintf(w, "used:        %s (%d blocks free)\n", units.FormatSize(out.UsedBytes), info.FreeBlocks)
	if out.AllocatedBytes >= 0 {
		fmt.Fprintf(w, "on host:     %s allocated\n", units.FormatSize(out.AllocatedBytes))
	}
	fmt.Fprintf(w, "inodes:      %d used of %d (%d bytes each)\n", info.Inodes-info.FreeInodes, info.Inodes, info.InodeSize)
	fmt.Fprintf(w, "features:    %s\n", strings.Join(info.Features, " "))
	if info.Journal {
		fmt.Fprintf(w, "journal:     %s\n", units.FormatSize(int64(info.JournalSize)))
	}
	state := "clean"
	switch {
	case info.Truncated:
		state = fmt.Sprintf("truncated: the file holds %s of the filesystem's %s (run gvx-vol fsck)",
			units.FormatSize(out.SizeBytes), units.FormatSize(int64(info.Blocks)*int64(info.BlockSize)))
	case info.JournalAborted != "":
		state = "journal replay stopped at a corrupt transaction, discarded with the ones after it: " + info.JournalAborted + " (run gvx-vol fsck)"
	case !info.Clean:
		state = "not cleanly closed (run gvx-vol fsck)"
	}
	fmt.Fprintf(w, "state:       %s\n", state)
	return nil
}
