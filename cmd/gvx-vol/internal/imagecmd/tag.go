package imagecmd

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
)

func tagCommand() *cli.Command {
	return &cli.Command{
		Name:      "tag",
		Usage:     "give an image in the cache a local name, as docker tag does",
		ArgsUsage: "SOURCE-OR-DIGEST NAME[:TAG]",
		Description: `Records NAME[:TAG] for an image already in the cache, named by the source it
was added from (in any spelling of it), by another of its names, or by its
cache digest (sha256:…, as image ls --json and image add print it). Every
profile the image is cached in gets the name; an existing name is moved.

rungv run NAME, the SDK's OCIImage and build-golden's --daemon-image then
take the image from the cache without any network (unless --pull always).
Names are normalised as Docker does: docker:dind, docker.io/library/
docker:dind and index.docker.io/library/docker:dind are one name. image rm
NAME removes the name; the image's files stay while any name holds them.

Examples:
   gvx-vol image add oci:./dind-layout
   gvx-vol image tag oci:./dind-layout docker:dind
   gvx-vol image tag sha256:3f1c… registry.example:5000/team/dind:v2`,
		Flags: []cli.Flag{
			cacheFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the new entries as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usage(c, "need SOURCE-OR-DIGEST and NAME[:TAG]")
			}
			cc, err := openCache(c)
			if err != nil {
				return err
			}
			tagged, err := image.Tag(cc, c.Args().Get(0), c.Args().Get(1))
			if errors.Is(err, image.ErrBadSource) {
				return cliutil.Usage(c, "%v", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return cliutil.PrintJSON(c.App.Writer, tagged)
			}
			for _, r := range tagged {
				fmt.Fprintf(c.App.Writer, "tagged %s (%s profile) as %s\n", r.Source, r.Profile, image.FamiliarName(r.Ref))
			}
			return nil
		},
	}
}
