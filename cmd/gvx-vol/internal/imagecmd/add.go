package imagecmd

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/image"
)

func addCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "pull or read an image and store it flattened as EROFS in the cache",
		ArgsUsage: "[--tag NAME[:TAG]]... SOURCE",
		Description: `SOURCE is one of
   REGISTRY/REPO[:TAG|@DIGEST]   a registry reference (credentials from the
                                 docker config: $DOCKER_CONFIG or ~/.docker)
   oci:DIR[:REF]                 an OCI image layout (REF: name or digest)
   docker-archive:TAR[:TAG]      a "docker save" tarball

Multi-platform images resolve to --platform, by default linux on this
machine's architecture. --profile runtime (default) writes what gVisor
mounts: flat-plain data and no xattrs (the xattrs the image had are listed
in the output); --profile full keeps them.

The image is stored once per layer chain and profile, however it was
named; adding it again, or from several processes at once, reuses the same
file. --json prints digest, erofs (the image file), config (its
configuration as JSON) and the rest of the record.

--tag records a local name for the image as well, as docker tag does:
rungv run NAME, the SDK's OCIImage and build-golden's --daemon-image then
find it in the cache without any network (unless --pull always). Names are
normalised as Docker does: docker:dind is docker.io/library/docker:dind.
Registries on loopback, *.local and private addresses are spoken to over
plain HTTP; --insecure-registry HOST[:PORT] adds others.

Examples:
   gvx-vol image add docker.io/library/docker:dind
   gvx-vol image add --tag docker:dind oci:./dind-layout
   gvx-vol image add --json oci:./layout:latest | jq -r .erofs`,
		Flags: []cli.Flag{
			cacheFlag(),
			&cli.StringFlag{Name: "profile", Value: "runtime", Usage: "`PROFILE`: runtime (what gVisor mounts) or full (inline data, xattrs)"},
			&cli.StringFlag{Name: "platform", Usage: "`OS/ARCH[/VARIANT]` to pick from multi-platform images (default linux/<this machine's arch>)"},
			&cli.StringSliceFlag{Name: "tag", Aliases: []string{"t"}, Usage: "also name the image `NAME[:TAG]` in the cache (repeatable)"},
			&cli.StringSliceFlag{Name: "insecure-registry", Usage: "pull from `HOST[:PORT]` over plain HTTP"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
		},
		Action: runAdd,
	}
}

func runAdd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage(c, "need exactly one SOURCE")
	}
	cc, err := openCache(c)
	if err != nil {
		return err
	}
	opts := image.Options{Profile: c.String("profile"), Platform: c.String("platform"),
		Tags: c.StringSlice("tag"), InsecureRegistries: c.StringSlice("insecure-registry")}
	var bar *cliutil.Progress
	if stderrIsTerminal() {
		opts.Progress = func(done, total int64) {
			if bar == nil {
				bar = cliutil.NewProgress(os.Stderr, "pulling layers", total)
			}
			bar.Set(done)
		}
	}
	res, err := image.Add(c.Context, cc, c.Args().First(), opts)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if errors.Is(err, image.ErrBadSource) {
			return cliutil.Usage(c, "%v", err)
		}
		return err
	}
	if res.Dropped > 0 {
		fmt.Fprintf(c.App.ErrWriter, "gvx-vol: warning: the %s profile dropped %d xattrs of the image (use --profile full to keep them):\n", res.Profile, res.Dropped)
		for i, d := range res.DroppedXattrs {
			if i == 5 && !c.Bool("json") {
				fmt.Fprintf(c.App.ErrWriter, "   … and %d more (listed by --json)\n", res.Dropped-i)
				break
			}
			fmt.Fprintln(c.App.ErrWriter, "  ", d)
		}
	}
	if c.Bool("json") {
		return cliutil.PrintJSON(c.App.Writer, res)
	}
	verb := "cached"
	if res.Created {
		verb = "added"
	}
	platform := ""
	if res.Platform != "" {
		platform = res.Platform + ", " // images without a platform (plain OCI layouts) have none
	}
	fmt.Fprintf(c.App.Writer, "%s %s (%s%s profile, %d layers, %s)\n  digest: %s\n  erofs:  %s\n  config: %s\n",
		verb, res.Ref, platform, res.Profile, res.Layers, cliutil.FormatSize(res.Size), res.Digest, res.EROFS, res.Config)
	for _, t := range opts.Tags {
		fmt.Fprintf(c.App.Writer, "  tagged: %s\n", t)
	}
	return nil
}
