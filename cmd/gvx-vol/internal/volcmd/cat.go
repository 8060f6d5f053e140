package volcmd

import (
	"io"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
)

// Cat returns the cat verb.
func Cat() *cli.Command {
	return &cli.Command{
		Name:      "cat",
		Usage:     "print a file of a volume",
		ArgsUsage: "FILE PATH",
		Description: `Writes the contents of the regular file PATH in the volume FILE to standard
output (holes read as zeros). The volume is opened read-only.

Example:
   gvx-vol cat golden-docker.ext4 /image/overlay2/repositories.json`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usage(c, "want FILE and PATH")
			}
			v, err := openVolume(c.Args().Get(0), true)
			if err != nil {
				return err
			}
			defer v.Close()
			r, err := v.Open(ext4lite.CleanPath(c.Args().Get(1)))
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.CopyBuffer(c.App.Writer, r, make([]byte, 1<<20))
			return err
		},
	}
}
