package erofscmd

import (
	"io"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

func catCommand() *cli.Command {
	return &cli.Command{
		Name:      "cat",
		Usage:     "print a regular file of an EROFS image",
		ArgsUsage: "IMAGE PATH",
		Description: `Copies the contents of the regular file PATH inside IMAGE to standard
output, without mounting the image.

Example:
   gvx-vol erofs cat rootfs.erofs etc/os-release`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usage(c, "need IMAGE and PATH")
			}
			im, f, err := openImage(c.Args().Get(0))
			if err != nil {
				return err
			}
			defer f.Close()
			r, err := im.Open(cleanPath(c.Args().Get(1)))
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(c.App.Writer, r)
			return err
		},
	}
}
