package erofscmd

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "verify an EROFS image's whole tree",
		ArgsUsage: "IMAGE",
		Description: `Validates IMAGE without mounting it: the superblock (magic, checksum,
features, geometry), then every inode, directory block, xattr and symlink
once, that "." and ".." are right, that no directory is reached twice, and
that link counts match the names. Exit status 1 and the first finding (with
its byte offset) if anything is wrong. Works on mkfs.erofs images too
(uncompressed ones).

Examples:
   gvx-vol erofs check rootfs.erofs
   gvx-vol erofs check --json rootfs.erofs`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the counts as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usage(c, "need IMAGE")
			}
			im, f, err := openImage(c.Args().Get(0))
			if err != nil {
				return err
			}
			defer f.Close()
			res, err := im.Check()
			if err != nil {
				return fmt.Errorf("%s: %w", c.Args().Get(0), err)
			}
			if c.Bool("json") {
				return cliutil.PrintJSON(c.App.Writer, res)
			}
			fmt.Fprintf(c.App.Writer, "%s: clean, %d inodes, %d directories, %d names, %s of file data\n",
				c.Args().Get(0), res.Inodes, res.Directories, res.Entries, cliutil.FormatSize(res.DataBytes))
			return nil
		},
	}
}
