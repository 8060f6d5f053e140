package imagecmd

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
)

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:      "gc",
		Usage:     "delete cached files no image names",
		ArgsUsage: " ",
		Description: `Deletes every EROFS, config and report file that no entry of the cache's
index names, and what interrupted adds left behind. It waits for running
"image add" commands to finish and holds new ones back while it runs, so it
never deletes what they are about to record.

Examples:
   gvx-vol image gc
   gvx-vol image gc --json`,
		Flags: []cli.Flag{
			cacheFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print what was removed as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cliutil.Usage(c, "gc takes no arguments")
			}
			cc, err := openCache(c)
			if err != nil {
				return err
			}
			r, err := image.GC(cc)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if r.Removed == nil {
					r.Removed = []string{}
				}
				return cliutil.PrintJSON(c.App.Writer, r)
			}
			fmt.Fprintf(c.App.Writer, "removed %d files (%s)\n", len(r.Removed), cliutil.FormatSize(r.Bytes))
			return nil
		},
	}
}
