package volcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
)

// Exit codes of fsck, as e2fsck's: 0 clean, 4 problems found, 8 could not
// check.
const (
	fsckFindings = 4
	fsckFailed   = 8
)

// Fsck returns the fsck verb.
func Fsck() *cli.Command {
	return &cli.Command{
		Name:      "fsck",
		Usage:     "check a volume's consistency (read-only)",
		ArgsUsage: "[--json] FILE",
		Description: `Checks every structure of the volume FILE — superblock, group descriptors,
bitmaps and free counts, inodes, extent trees, directories and htree
indexes, xattr blocks, link counts, checksums — and lists what it finds,
like e2fsck -fn. A volume whose journal needs recovery (a crash, a
SIGKILLed episode) is replayed first, as e2fsck does: in the file, or with
-n in memory only (it says so: the file still needs recovery, and the
findings are the replayed volume's). A volume ext4lite cannot open
read-write (orphan_present: files Linux left unlinked while open) is
replayed in memory as with -n, with a message saying why. Nothing else is
ever written.

Exit status: 0 clean, 4 findings listed, 8 the volume could not be checked.

Examples:
   gvx-vol fsck golden-docker.ext4
   gvx-vol fsck --json ep-0042.ext4
   gvx-vol fsck -n golden-docker.ext4   # never writes, even to replay`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.IntFlag{Name: "max", Value: 200, Usage: "stop listing after this many findings"},
			&cli.BoolFlag{Name: "n", Usage: "never write: replay a dirty journal in memory only and check that"},
		},
		Action: oneThread(func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usage(c, "want exactly one FILE")
			}
			path := c.Args().First()
			rep, replayed, err := check(path, c.Bool("n"), c.Int("max"))
			if err != nil {
				return &cliutil.ExitError{Code: fsckFailed, Err: fmt.Errorf("%s: %w", path, err)}
			}
			if replayed != "" {
				fmt.Fprintf(c.App.ErrWriter, "%s: %s\n", path, replayed)
			}
			if c.Bool("json") {
				type jf struct {
					Ino   uint32 `json:"ino,omitempty"`
					Block uint64 `json:"block,omitempty"`
					Msg   string `json:"msg"`
				}
				out := struct {
					File     string `json:"file"`
					Clean    bool   `json:"clean"`
					Findings []jf   `json:"findings"`
					Omitted  int    `json:"omitted,omitempty"`
					Inodes   uint32 `json:"inodes_used"`
					Blocks   uint64 `json:"blocks_used"`
					Recovery string `json:"recovery,omitempty"` // what was done about a journal that needed recovery
				}{File: path, Clean: len(rep.Findings) == 0, Findings: []jf{}, Omitted: rep.Omitted, Inodes: rep.Inodes, Blocks: rep.Blocks, Recovery: replayed}
				for _, f := range rep.Findings {
					out.Findings = append(out.Findings, jf{f.Ino, f.Block, f.Msg})
				}
				if err := cliutil.PrintJSON(c.App.Writer, out); err != nil {
					return err
				}
			} else {
				for _, f := range rep.Findings {
					fmt.Fprintln(c.App.Writer, f.String())
				}
				if rep.Omitted > 0 {
					fmt.Fprintf(c.App.Writer, "... and %d more\n", rep.Omitted)
				}
				if len(rep.Findings) == 0 {
					fmt.Fprintf(c.App.Writer, "%s: clean, %d inodes, %d blocks in use\n", path, rep.Inodes, rep.Blocks)
				}
			}
			if len(rep.Findings) > 0 {
				return &cliutil.ExitError{Code: fsckFindings, Err: fmt.Errorf("%s: %d problem(s) found", path, len(rep.Findings)+rep.Omitted)}
			}
			return nil
		}),
	}
}

// check replays the journal when the volume needs it (into the file, or
// in memory with readOnly), then checks. replayed says what was done, for
// the report: as e2fsck -fn says it skipped the replay, -n says the file
// still needs recovery, and the findings are those of the replayed volume.
// When the volume cannot be opened read-write to replay it into the file
// (orphan_present, a read-only file), the replay is done in memory and
// replayed says why.
func check(path string, readOnly bool, max int) (*ext4lite.CheckReport, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	opts := &ext4lite.CheckOptions{MaxFindings: max}
	dirty, err := ext4lite.NeedsRecovery(f)
	if err != nil || !dirty {
		rep, cerr := ext4lite.Check(f, opts)
		return rep, "", cerr
	}
	if readOnly {
		rep, err := checkInMemory(path, opts)
		return rep, "the journal needs recovery: replayed in memory only (-n), the file still needs it; the check is of the replayed volume", err
	}
	v, err := ext4lite.Open(path, nil)
	if err != nil {
		if !errors.Is(err, ext4lite.ErrUnsupported) && !errors.Is(err, fs.ErrPermission) {
			return nil, "", err
		}
		rep, cerr := checkInMemory(path, opts)
		return rep, fmt.Sprintf("the journal needs recovery, but the volume cannot be opened read-write to replay it (%v); replayed in memory only, as with -n: the file still needs recovery; the check is of the replayed volume", err), cerr
	}
	if err := v.Close(); err != nil {
		return nil, "", err
	}
	rep, err := ext4lite.Check(f, opts)
	return rep, "journal replayed", err
}

// checkInMemory opens the volume read-only, which replays its journal in
// memory, and checks what that shows.
func checkInMemory(path string, opts *ext4lite.CheckOptions) (*ext4lite.CheckReport, error) {
	v, err := ext4lite.Open(path, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer v.Close()
	o := *opts
	o.Replayed = true
	return ext4lite.Check(v.View(), &o)
}
