// Package imagecmd is gvx-vol's image command group: add OCI and Docker
// images to the EROFS image cache, list, remove and garbage-collect them.
// All logic is in packages image and erofs/cache.
package imagecmd

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image"
)

// Command returns the image command group, a new one at each call
// (urfave/cli's setup changes a command in place).
func Command() *cli.Command {
	return &cli.Command{
		Name:  "image",
		Usage: "add container images to the EROFS image cache, list, remove and collect them",
		Description: `Episodes boot from flattened, read-only EROFS images kept in a shared,
content-addressed cache. "image add" pulls or reads an image, applies its
layers in order (whiteouts, opaque directories) and stores the result under
the digest of its layer chain, with the image's configuration (env,
entrypoint, cmd, workdir, user, ports) beside it as JSON.

"image add --tag" and "image tag" give an image a local name (docker:dind)
that rungv run, the SDK and build-golden resolve from the cache with no
network.

The cache directory is --cache, else $GVX_CACHE_DIR or $GVX_CACHE (as rungv
reads them), else /var/cache/gvx for root and $XDG_CACHE_HOME/gvx
(~/.cache/gvx) for others.

Examples:
   gvx-vol image add docker.io/library/docker:dind
   gvx-vol image add --platform linux/arm64 --json localhost:5000/app:v1
   gvx-vol image add oci:./busybox-layout
   gvx-vol image add --tag docker:dind oci:./dind-layout
   gvx-vol image add docker-archive:app.tar:app:v1
   gvx-vol image ls
   gvx-vol image rm localhost:5000/app:v1 && gvx-vol image gc`,
		Subcommands: []*cli.Command{addCommand(), tagCommand(), lsCommand(), rmCommand(), gcCommand()},
	}
}

func cacheFlag() cli.Flag {
	return &cli.StringFlag{Name: "cache", Usage: "cache `DIR` (default: $GVX_CACHE_DIR, $GVX_CACHE, /var/cache/gvx for root, else ~/.cache/gvx)"}
}

// openCache opens the --cache directory or the default one.
func openCache(c *cli.Context) (*cache.Cache, error) {
	dir := c.String("cache")
	if dir == "" {
		d, err := image.DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache directory: %w (pass --cache DIR or set GVX_CACHE_DIR)", err)
		}
		dir = d
	}
	cc, err := cache.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (pass --cache DIR or set GVX_CACHE_DIR to use another directory)", err)
	}
	return cc, nil
}

func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }
