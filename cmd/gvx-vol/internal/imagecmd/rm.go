package imagecmd

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
)

func rmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove images from the cache's index (gc frees their files)",
		ArgsUsage: "REF...",
		Description: `Removes each REF (a SOURCE as given to "image add", in any spelling that
resolves to the same image, a local name, or a cache digest from "image ls
--json": every entry of that image) from the index, in every profile unless
--profile says which. The files stay until "gvx-vol image gc", and are kept
as long as another REF or name uses them.

Examples:
   gvx-vol image rm localhost:5000/app:v1
   gvx-vol image rm --profile full oci:./layout
   gvx-vol image rm localhost:5000/app:v1 && gvx-vol image gc`,
		Flags: []cli.Flag{
			cacheFlag(),
			&cli.StringFlag{Name: "profile", Usage: "remove only this `PROFILE` (runtime or full)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cliutil.Usage(c, "need at least one REF")
			}
			cc, err := openCache(c)
			if err != nil {
				return err
			}
			for _, ref := range c.Args().Slice() {
				gone, err := image.Remove(cc, ref, c.String("profile"))
				if err != nil {
					return err
				}
				for _, r := range gone {
					fmt.Fprintf(c.App.Writer, "removed %s (%s profile, %s)\n", image.FamiliarName(r.Ref), r.Profile, shortDigest(r.Digest))
				}
			}
			return nil
		},
	}
}
