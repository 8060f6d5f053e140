package goldencmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/golden"
	"z.gfire.dev/gvx/image"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build-golden",
		Usage:     "make a golden /var/lib/docker volume with images preloaded",
		ArgsUsage: "OUT.ext4",
		Description: `Builds the volume every episode clones: creates a new ext4lite volume, runs
the Docker daemon image under the runtime (the rungv binary: --rungv,
$GVX_RUNGV or PATH) with the volume at /var/lib/docker, loads each --load
docker-archive tar and each --pull reference, stops the daemon gracefully
(SIGTERM, so it flushes its state), compacts the volume (empty journal, free
space punched out) and publishes OUT atomically (temporary file, fsync,
rename, fsync of the directory). An existing OUT is kept unless --force. If
anything fails, no OUT and no temporary file are left.

--daemon-image is resolved like rungv run's image, in the same image cache
($GVX_CACHE_DIR or $GVX_CACHE, else /var/cache/gvx for root, ~/.cache/gvx
for others): a local name the cache knows (gvx-vol image add --tag
docker:dind oci:DIR) needs no network; --daemon-pull always|missing|never
says when a registry reference is fetched (default missing). An image whose
entrypoint is dockerd-entrypoint.sh or dockerd, as docker:dind's, starts
the daemon with it, else dockerd-entrypoint.sh from PATH; the image must
have the docker CLI. dockerd gets --iptables=false --ip6tables=false (as
rungv run adds them: the sandbox's netstack has no NAT), the --daemon-arg
flags, and listens on the guest's unix:///var/run/docker.sock only unless
a --daemon-arg names -H/--host.

--pull pulls on the host, not in the guest (which has no network): with the
host's registry credentials ($DOCKER_CONFIG or ~/.docker/config.json and its
credential helpers), for --platform (default linux on the host's
architecture; the rules and errors of gvx-vol image add), into a
docker-archive tagged with the reference in a private directory next to
OUT, removed afterwards; the guest loads it like a --load tar. Pin a digest
with REPO:TAG@sha256:... (the image is tagged REPO:TAG). Registries on
loopback, *.local and private (RFC 1918) addresses are spoken to over plain
HTTP; --insecure-registry HOST[:PORT] adds others. In the --json summary a
pulled image's ref is the reference as given and its digest the registry's
manifest digest.

Examples:
   gvx-vol image add --tag docker:dind oci:/srv/images/dind
   gvx-vol build-golden --load python.tar --load redis.tar golden-docker.ext4
   gvx-vol build-golden --daemon-image oci:/srv/images/dind \
       --pull python:3.11-slim --pull 10.0.0.5:5000/team/tools:v3 \
       --size 32G --json /srv/rl-snapshots/golden-docker.ext4`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "daemon-image", Value: golden.DefaultDaemonImage, Usage: "the Docker daemon `IMAGE`: oci:DIR, docker-archive:TAR, a reference or a local name"},
			&cli.StringFlag{Name: "daemon-pull", Value: string(image.PullMissing), Usage: "when to fetch a registry --daemon-image: `POLICY` always, missing or never"},
			&cli.StringSliceFlag{Name: "pull", Usage: "pull `REF` from its registry, on the host, into the volume (repeatable)"},
			&cli.StringFlag{Name: "platform", Usage: "the `OS/ARCH[/VARIANT]` to pull (default: linux/<this machine's arch>)"},
			&cli.StringSliceFlag{Name: "insecure-registry", Usage: "pull from `HOST[:PORT]` over plain HTTP (loopback and private always are)"},
			&cli.StringSliceFlag{Name: "load", Usage: "docker load the docker-archive `TAR` into the volume (repeatable)"},
			&cli.StringFlag{Name: "size", Value: "32G", Usage: "volume size (a sparse file: only what is written takes space)"},
			&cli.StringSliceFlag{Name: "daemon-arg", Usage: "extra dockerd `FLAG` (repeatable)"},
			&cli.StringFlag{Name: "rungv", Usage: "the rungv binary (default: $GVX_RUNGV, then PATH)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "give up after this long"},
			&cli.DurationFlag{Name: "ready-timeout", Value: golden.DefaultReadyTimeout, Usage: "how long the daemon may take to answer"},
			&cli.Int64Flag{Name: "memory-bytes", Usage: "memory the daemon's guest sees, in bytes (0: the host's)"},
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace OUT if it exists"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON summary (images, digests, volume sizes) on stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
		},
		Action: build,
	}
}

func build(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage(c, "want exactly one OUT file")
	}
	size, err := cliutil.ParseSize(c.String("size"))
	if err != nil {
		return cliutil.Usage(c, "--size: %v", err)
	}
	pull, err := image.ParsePullPolicy(c.String("daemon-pull"))
	if err != nil {
		return cliutil.Usage(c, "--daemon-pull: %v", err)
	}
	logw := c.App.ErrWriter
	if c.Bool("quiet") {
		logw = io.Discard
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.Duration("timeout"))
	defer cancel()
	sum, err := golden.Build(ctx, golden.Options{
		Out:                c.Args().First(),
		Force:              c.Bool("force"),
		Size:               size,
		DaemonImage:        c.String("daemon-image"),
		DaemonPull:         pull,
		DaemonArgs:         c.StringSlice("daemon-arg"),
		Loads:              c.StringSlice("load"),
		Pulls:              c.StringSlice("pull"),
		Platform:           c.String("platform"),
		InsecureRegistries: c.StringSlice("insecure-registry"),
		Rungv:              c.String("rungv"),
		ReadyTimeout:       c.Duration("ready-timeout"),
		MemoryBytes:        c.Int64("memory-bytes"),
		Log:                logw,
	})
	if errors.Is(err, golden.ErrBadOption) {
		return cliutil.Usage(c, "%v", err)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return cliutil.PrintJSON(c.App.Writer, sum)
	}
	fmt.Fprintf(logw, "%s: %d image(s), %s used, %s allocated of %s, in %.1fs\n", sum.Volume, len(sum.Images),
		cliutil.FormatSize(sum.UsedBytes), sizeOrUnknown(sum.AllocatedBytes), cliutil.FormatSize(sum.SizeBytes), sum.Seconds)
	return nil
}

func sizeOrUnknown(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return cliutil.FormatSize(n)
}
