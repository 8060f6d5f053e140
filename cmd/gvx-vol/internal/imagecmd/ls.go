package imagecmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:      "ls",
		Usage:     "list the images in the cache",
		ArgsUsage: " ",
		Description: `Lists every image added to the cache: its source or local name (as Docker
prints it: docker:dind), profile, platform, the cache digest of its
flattened form, its size and when it was added; a local name's SOURCE is
where its image came from. --json prints the full records, with the paths
of the EROFS and config files.

Examples:
   gvx-vol image ls
   gvx-vol image ls --json | jq -r '.[] | .erofs'`,
		Flags: []cli.Flag{
			cacheFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the records as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return cliutil.Usage(c, "ls takes no arguments")
			}
			cc, err := openCache(c)
			if err != nil {
				return err
			}
			list, err := image.List(cc)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if list == nil {
					list = []*image.Result{}
				}
				return cliutil.PrintJSON(c.App.Writer, list)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REF\tPROFILE\tPLATFORM\tDIGEST\tSIZE\tADDED\tSOURCE")
			for _, r := range list {
				size := cliutil.FormatSize(r.Size)
				if r.EROFS == "" {
					size = "missing"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", image.FamiliarName(r.Ref), r.Profile, r.Platform,
					shortDigest(r.Digest), size, r.Added.Local().Format("2006-01-02 15:04"), r.Source)
			}
			return tw.Flush()
		},
	}
}

func shortDigest(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}
