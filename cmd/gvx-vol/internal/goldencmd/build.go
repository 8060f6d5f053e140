package goldencmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/pkg/gvx"
)

// DefaultDaemonImage is the daemon image of the seeds' workflow.
const DefaultDaemonImage = "docker:dind"

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build-golden",
		Usage:     "make a golden /var/lib/docker volume: run the Docker daemon on a new volume, preload images, stop, compact, publish",
		ArgsUsage: "[--daemon-image IMAGE] [--pull REF]... [--load TAR]... [--size 32G] OUT.ext4",
		Description: `Builds the volume every episode clones: creates a new ext4lite volume, runs
the Docker daemon image under the runtime (the rungv binary: --rungv,
$GVX_RUNGV or PATH) with the volume at /var/lib/docker, loads each --load
docker-archive tar and each --pull reference, stops the daemon gracefully
(SIGTERM, so it flushes its state), compacts the volume (empty journal, free
space punched out) and publishes OUT atomically (temporary file, fsync,
rename, fsync of the directory). An existing OUT is kept unless --force. If
anything fails, no OUT and no temporary file are left.

The daemon image must provide dockerd-entrypoint.sh and the docker CLI, as
docker:dind does; --daemon-arg flags go to dockerd (for example
--daemon-arg=--iptables=false). The daemon listens on the guest's
unix:///var/run/docker.sock only, unless a --daemon-arg names -H/--host.

--pull pulls on the host, not in the guest (which has no network): with the
host's registry credentials ($DOCKER_CONFIG or ~/.docker/config.json and its
credential helpers), for --platform (default linux on the host's
architecture), into a docker-archive tagged with the reference in a private
directory next to OUT, removed afterwards; the guest loads it like a --load
tar. Pin a digest with REPO:TAG@sha256:... (the image is tagged REPO:TAG).
Registries on loopback, *.local and private (RFC 1918) addresses are spoken
to over plain HTTP; --insecure-registry HOST[:PORT] adds others. In the
--json summary a pulled image's ref is the reference as given and its digest
the registry's manifest digest.

Examples:
   gvx-vol build-golden --load python.tar --load redis.tar golden-docker.ext4
   gvx-vol build-golden --daemon-image oci:/srv/images/dind --pull python:3.11-slim \
       --pull 10.0.0.5:5000/team/tools:v3 --size 32G --json /srv/rl-snapshots/golden-docker.ext4`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "daemon-image", Value: DefaultDaemonImage, Usage: "the Docker daemon `IMAGE` (oci:DIR, docker-archive:TAR, or a reference rungv resolves)"},
			&cli.StringSliceFlag{Name: "pull", Usage: "pull `REF` from its registry, on the host, into the volume (repeatable)"},
			&cli.StringFlag{Name: "platform", Usage: "the `OS/ARCH[/VARIANT]` to pull (default: linux on the host's architecture)"},
			&cli.StringSliceFlag{Name: "insecure-registry", Usage: "pull from `HOST[:PORT]` over plain HTTP (loopback and private addresses always are)"},
			&cli.StringSliceFlag{Name: "load", Usage: "docker load the docker-archive `TAR` into the volume (repeatable)"},
			&cli.StringFlag{Name: "size", Value: "32G", Usage: "volume size (a sparse file: only what is written takes space)"},
			&cli.StringSliceFlag{Name: "daemon-arg", Usage: "extra dockerd `FLAG` (repeatable)"},
			&cli.StringFlag{Name: "rungv", Usage: "the rungv binary (default: $GVX_RUNGV, then PATH)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "give up after this long"},
			&cli.DurationFlag{Name: "ready-timeout", Value: 2 * time.Minute, Usage: "how long the daemon may take to answer"},
			&cli.Int64Flag{Name: "memory-bytes", Usage: "memory the daemon's guest sees, in bytes (0: the host's)"},
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace OUT if it exists"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON summary (images, digests, volume sizes) on stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress on stderr"},
		},
		Action: build,
	}
}

// Summary is build-golden's --json output.
type Summary struct {
	Volume         string  `json:"volume"`
	SizeBytes      int64   `json:"size_bytes"`
	UsedBytes      int64   `json:"used_bytes"`      // blocks in use × block size
	AllocatedBytes int64   `json:"allocated_bytes"` // host bytes the file takes (-1: unknown)
	Images         []Image `json:"images"`
	DaemonImage    string  `json:"daemon_image"`
	Seconds        float64 `json:"seconds"`
}

func build(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage(c, "want exactly one OUT file")
	}
	out, err := filepath.Abs(c.Args().First())
	if err != nil {
		return err
	}
	size, err := cliutil.ParseSize(c.String("size"))
	if err != nil {
		return cliutil.Usage(c, "--size: %v", err)
	}
	pl := &puller{platform: image.DefaultPlatform(), keychain: authn.DefaultKeychain}
	if s := c.String("platform"); s != "" {
		if pl.platform, err = image.ParsePlatform(s); err != nil {
			return cliutil.Usage(c, "--platform: %v", err)
		}
	}
	var pulls []*pullSpec
	for _, r := range c.StringSlice("pull") {
		p, err := parsePull(r, c.StringSlice("insecure-registry"))
		if err != nil {
			return cliutil.Usage(c, "%v", err)
		}
		pulls = append(pulls, p)
	}
	if _, err := os.Lstat(out); err == nil && !c.Bool("force") {
		return fmt.Errorf("%s exists (use --force to replace it)", out)
	}
	logw := c.App.ErrWriter
	if c.Bool("quiet") {
		logw = io.Discard
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.Duration("timeout"))
	defer cancel()

	o := options{
		out:        out,
		size:       size,
		image:      c.String("daemon-image"),
		loads:      c.StringSlice("load"),
		pulls:      pulls,
		puller:     pl,
		daemonArgs: c.StringSlice("daemon-arg"),
		rungv:      c.String("rungv"),
		readySecs:  int(c.Duration("ready-timeout").Seconds()),
		memory:     c.Int64("memory-bytes"),
		log:        logw,
	}
	pl.log = logw
	start := time.Now()
	sum, err := o.run(ctx)
	if err != nil {
		return fmt.Errorf("build-golden: %w", err)
	}
	sum.Seconds = time.Since(start).Seconds()
	if c.Bool("json") {
		return cliutil.PrintJSON(c.App.Writer, sum)
	}
	fmt.Fprintf(logw, "%s: %d image(s), %s used, %s allocated of %s, in %.1fs\n", out, len(sum.Images),
		cliutil.FormatSize(sum.UsedBytes), sizeOrUnknown(sum.AllocatedBytes), cliutil.FormatSize(sum.SizeBytes), sum.Seconds)
	return nil
}

func sizeOrUnknown(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return cliutil.FormatSize(n)
}

type options struct {
	out        string
	size       int64
	image      string
	loads      []string
	pulls      []*pullSpec
	puller     *puller
	daemonArgs []string
	rungv      string
	readySecs  int
	memory     int64
	log        io.Writer
}

// run pulls, builds the volume under a temporary name next to out and
// publishes it; on any error the temporary file is removed, and the pulled
// archives always are.
func (o *options) run(ctx context.Context) (sum *Summary, err error) {
	pullDir, ps, err := o.puller.pullAll(ctx, o.pulls, o.out)
	if err != nil {
		return nil, err
	}
	if pullDir != "" {
		defer os.RemoveAll(pullDir)
	}
	loads := append([]string(nil), o.loads...)
	for _, p := range ps {
		loads = append(loads, p.path)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(o.out), "."+filepath.Base(o.out)+".tmp-"+hex.EncodeToString(rnd[:]))
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	v, err := ext4lite.Create(tmp, o.size, &ext4lite.CreateOptions{Label: "gvx-golden"})
	if err != nil {
		return nil, err
	}
	if err := v.Close(); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.log, "created %s volume; starting the daemon (%s)\n", cliutil.FormatSize(o.size), o.image)

	rep, err := o.runDaemon(ctx, tmp, loads)
	if err != nil {
		return nil, err
	}
	if err := annotate(rep.images, ps); err != nil {
		return nil, err
	}

	fmt.Fprintln(o.log, "compacting")
	v, err = ext4lite.Open(tmp, nil)
	if err != nil {
		return nil, fmt.Errorf("reopen the volume the daemon wrote: %w", err)
	}
	st, err := v.Compact()
	if cerr := v.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	if err := publish(tmp, o.out); err != nil {
		return nil, err
	}
	return &Summary{
		Volume: o.out, SizeBytes: o.size, UsedBytes: st.UsedBytes, AllocatedBytes: st.AllocatedAfter,
		Images: rep.images, DaemonImage: o.image,
	}, nil
}

// runDaemon runs the daemon image on the volume with the guest script,
// loading the docker-archives loads, and returns what the guest reported,
// or why it failed. The guest has no network.
func (o *options) runDaemon(ctx context.Context, vol string, loads []string) (*report, error) {
	cfg := gvx.Config{
		Rungv:         o.rungv,
		OCIImage:      o.image,
		Entrypoint:    []string{"sh", "-c"},
		EntrypointSet: true,
		Envv:          []string{"DOCKER_TLS_CERTDIR="},
		NetRaw:        true,
		AllowSUID:     true,
		Mounts:        []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: "/var/lib/docker"}},
		Resources:     gvx.Resources{MemoryBytes: o.memory},
	}
	// Each tar itself (never its directory) is bind-mounted read-only;
	// the guest loads /gvx-golden/load/N/NAME.
	var guestLoads []string
	for i, l := range loads {
		abs, err := filepath.Abs(l)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("--load: %w", err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("--load %s: not a regular file", l)
		}
		g := fmt.Sprintf("/gvx-golden/load/%d/%s", i, filepath.Base(abs))
		cfg.Mounts = append(cfg.Mounts, gvx.Mount{Kind: gvx.MountBind, ImagePath: abs, GuestPath: g, ReadOnly: true})
		guestLoads = append(guestLoads, g)
	}
	readySecs := o.readySecs
	if readySecs <= 0 {
		readySecs = 120
	}
	cfg.Cmd = []string{guestScript(guestLoads, o.daemonArgs, readySecs)}

	pr, pw := io.Pipe()
	cfg.Stdout = pw
	var errTail tailWriter
	cfg.Stderr = &errTail
	sb, err := gvx.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	start := time.Now()
	repc := make(chan *report, 1)
	go func() {
		repc <- parseGuest(pr, func(kind, arg string) {
			switch kind {
			case "ready":
				fmt.Fprintf(o.log, "daemon ready in %.1fs\n", time.Since(start).Seconds())
			case "load":
				fmt.Fprintf(o.log, "%s %s\n", kind, arg)
			case "stopped":
				fmt.Fprintf(o.log, "daemon stopped (status %s)\n", arg)
			case "output":
				fmt.Fprintf(o.log, "  %s\n", arg)
			}
		})
	}()
	code, err := sb.Run(ctx)
	pw.Close()
	rep := <-repc
	switch {
	case err != nil:
		return nil, fmt.Errorf("run the daemon image: %w%s", err, errTail.suffix())
	case rep.fail != "":
		return nil, fmt.Errorf("%s:\n%s", rep.fail, strings.Join(rep.tail, "\n"))
	case !rep.ready:
		return nil, fmt.Errorf("the daemon image exited with status %d before its daemon answered (does it have dockerd-entrypoint.sh and docker?)%s", code, errTail.suffix())
	case !rep.stopped || rep.status != 0 || code != 0:
		return nil, fmt.Errorf("the daemon did not stop cleanly (status %d, guest exit %d):\n%s", rep.status, code, strings.Join(rep.tail, "\n"))
	}
	return rep, nil
}

// publish renames tmp to out durably: fsync the file, rename, fsync the
// directory.
func publish(tmp, out string) error {
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(out))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) { // EINVAL: directories cannot be synced here (Windows)
		return fmt.Errorf("fsync %s: %w", filepath.Dir(out), err)
	}
	return nil
}

// tailWriter keeps the last 4 KiB written to it (the guest's stderr).
type tailWriter struct{ b []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4<<10 {
		t.b = t.b[len(t.b)-4<<10:]
	}
	return len(p), nil
}

func (t *tailWriter) suffix() string {
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return "; its stderr ends:\n" + s
}
