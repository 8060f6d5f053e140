package erofscmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "build an EROFS image from a host directory or a tar archive",
		ArgsUsage: "SRC OUT.erofs",
		Description: `Writes the tree at SRC (a directory, or with --from-tar a tar archive,
optionally gzip/zstd/bzip2 compressed, "-" for stdin) into OUT as an EROFS
image with 4 KiB blocks. Modes, owners, nanosecond mtimes, devices, fifos,
sockets, hard links and xattrs are kept exactly; symlinks are never followed.

--profile full (default) keeps everything EROFS stores: tail-packed inline
data and xattrs. --profile runtime writes what gVisor's Sentry mounts:
flat-plain data only and no xattrs; what it drops is printed as warnings (and
listed in --json output), never lost silently.

The same tree always gives the same bytes: the image's base time comes from
--epoch, or else from the tree itself, never from the clock. OUT is written
under a temporary name, fsynced and renamed into place, so it is never seen
half-made.

A directory is scanned by --workers goroutines (default: one per CPU) and
its files' bytes are copied straight into OUT (copy_file_range); a tar's
are spooled (64 MiB in memory, then a file in --tmpdir, by default OUT's
directory, block-aligned so copy_file_range can share blocks where the
filesystem does) and copied in the same way. The image
does not depend on --workers.

Examples:
   gvx-vol erofs build ./rootfs rootfs.erofs
   gvx-vol erofs build --profile runtime --json ./rootfs rootfs.erofs
   docker export c1 | gvx-vol erofs build --from-tar - c1.erofs`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "from-tar", Usage: "SRC is a tar archive (\"-\" for stdin), not a directory"},
			&cli.StringFlag{Name: "profile", Value: "full", Usage: "`PROFILE`: full (inline data, xattrs) or runtime (what gVisor mounts)"},
			&cli.Int64Flag{Name: "epoch", Usage: "image base time in Unix `SECONDS` (default: the tree's most common mtime)"},
			&cli.IntFlag{Name: "workers", Usage: "`N` goroutines scan SRC and write file data (default: GOMAXPROCS); the image does not depend on it"},
			&cli.StringFlag{Name: "tmpdir", Usage: "`DIR` to spool a tar's file data in (default: OUT's directory, so copying it into OUT stays in one filesystem)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing on success (warnings still go to stderr)"},
		},
		Action: runBuild,
	}
}

type buildJSON struct {
	Output  string  `json:"output"`
	Seconds float64 `json:"seconds"`
	erofs.Report
}

func runBuild(c *cli.Context) error {
	if c.NArg() != 2 {
		return cliutil.Usage(c, "need SRC and OUT.erofs")
	}
	src, out := c.Args().Get(0), c.Args().Get(1)
	prof, err := erofs.ParseProfile(c.String("profile"))
	if err != nil {
		return cliutil.Usage(c, "%v", err)
	}
	if c.Int("workers") < 0 {
		return cliutil.Usage(c, "--workers %d: want 1 or more (0 or unset: GOMAXPROCS)", c.Int("workers"))
	}
	tmp := c.String("tmpdir")
	if tmp == "" {
		tmp = filepath.Dir(out)
	}
	opts := erofs.Options{Profile: prof, Path: out, TempDir: tmp, Workers: c.Int("workers")}
	if c.IsSet("epoch") {
		opts.Epoch = time.Unix(c.Int64("epoch"), 0)
	}
	start := time.Now()
	b := erofs.NewBuilder(opts)
	defer b.Close()
	if c.Bool("from-tar") {
		err = importTar(b, src)
	} else {
		err = importDir(b, src)
	}
	if err != nil {
		return err
	}
	if err := b.Finish(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	rep := b.Report()
	for _, w := range rep.Warnings {
		fmt.Fprintln(c.App.ErrWriter, "gvx-vol: warning:", w)
	}
	if n := rep.Dropped - len(rep.Warnings); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "gvx-vol: warning: … and %d more dropped items\n", n)
	}
	switch {
	case c.Bool("json"):
		return cliutil.PrintJSON(c.App.Writer, buildJSON{Output: out, Seconds: time.Since(start).Seconds(), Report: rep})
	case !c.Bool("quiet"):
		fmt.Fprintf(c.App.Writer, "%s: %s EROFS image, %d inodes, %d blocks (%s), %s profile, %d dropped, in %.2fs\n",
			out, "4 KiB-block", rep.Inodes, rep.Blocks, cliutil.FormatSize(rep.Bytes), rep.Profile, rep.Dropped, time.Since(start).Seconds())
	}
	return nil
}

// importDir scans the host directory src in parallel (erofs.AddDir); file
// data is read when the image is written, straight into it.
func importDir(b *erofs.Builder, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (use --from-tar for an archive)", src)
	}
	return explainUnsupported(b.AddDir(src))
}

// explainUnsupported adds the way out to an entry EROFS cannot store.
func explainUnsupported(err error) error {
	if errors.Is(err, erofs.ErrUnsupported) {
		return fmt.Errorf("%w\n(EROFS cannot store this; --profile runtime drops xattrs)", err)
	}
	return err
}

// errSink remembers the first error its WriteFile returned.
type errSink struct {
	sink.Sink
	err error
}

func (s *errSink) WriteFile(h *sink.Header, r io.Reader) error {
	err := s.Sink.WriteFile(h, r)
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("%s: %w", h.Path, err)
	}
	return err
}

func importTar(b *erofs.Builder, src string) error {
	var r io.Reader = os.Stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if err := overlay.ImportTar(b, r, overlay.ImportOptions{}); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}
