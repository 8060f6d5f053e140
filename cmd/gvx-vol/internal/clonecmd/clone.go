// Package clonecmd is gvx-vol's clone verb: O(1) copy-on-write clones of
// golden volumes (an episode's reset), one at a time or many at once. All
// clone logic is in package reflink; this file holds the help and the
// flags, run.go the verb.
package clonecmd

import (
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// Command returns the clone verb, a new one at each call (urfave/cli's
// setup changes a command in place).
func Command() *cli.Command {
	return &cli.Command{
		Name:      "clone",
		Usage:     "clone a golden volume copy-on-write (an episode's reset), once or N times",
		ArgsUsage: "SRC DST | -n N SRC PATTERN | --probe DIR...",
		Description: `Makes DST a reflink clone of SRC: DST shares SRC's blocks until either is
written, so a clone of a 16 GiB volume takes a few milliseconds and no
space; only the 4 KiB blocks an episode changes cost space. This is
cp --reflink=always, as a library call the runtime and SDK also use.

Cloning needs a filesystem that can: XFS made with -m reflink=1 (the default
since xfsprogs 5.1), Btrfs, bcachefs, APFS (macOS), ReFS or Dev Drive
(Windows). SRC and DST must be on the same one. On any other filesystem the
default --reflink=always fails and says so; --reflink=auto then makes a
sparse copy instead (slow: it copies the data, but keeps holes as holes).

DST is written under a temporary name, fsynced and renamed into place: it is
never seen half-made. The fsyncs are most of a clone's ~1 ms; --no-sync skips
them for scratch volumes a crash may lose (never for golden volumes). An existing DST is kept unless --force. If DST is a
directory the clone goes into it under SRC's name.

With --count N, DST is a pattern with one integer verb (%d, %04d…) and gvx-vol
makes N clones numbered --start, --start+1, … (default 0..N-1), stopping at
the first error.

Examples:
   # reset episode 42 from the golden volume
   gvx-vol clone --force golden-docker.ext4 /var/lib/gvx/ep-0042.ext4

   # prepare 64 episodes, ep-0000.ext4 … ep-0063.ext4, and show timings as JSON
   gvx-vol clone --count 64 --json golden-docker.ext4 /var/lib/gvx/ep-%04d.ext4

   # episodes 64..127 next to them
   gvx-vol clone --count 64 --start 64 golden-docker.ext4 /var/lib/gvx/ep-%04d.ext4

   # on a filesystem that cannot clone (ext4, tmpfs): copy sparsely instead
   gvx-vol clone --reflink=auto golden-docker.ext4 /tmp/ep-0000.ext4

   # can this directory clone? (exit status 1 if not)
   gvx-vol clone --probe /var/lib/gvx`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "reflink", Value: "always", Usage: "`WHEN` to clone: always (clone or fail), auto (clone, else sparse copy), never (sparse copy)"},
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "replace an existing DST (atomically)"},
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "make `N` clones; DST is a pattern such as ep-%04d.ext4"},
			&cli.IntFlag{Name: "start", DefaultText: "0", Usage: "first index with --count"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsyncs (most of the latency): for scratch episode volumes only; a crash may lose DST"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON (method and latency per clone)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing on success"},
			&cli.BoolFlag{Name: "probe", Usage: "only tell whether each DIR argument can clone"},
		},
		Action: func(c *cli.Context) error {
			usage := func(format string, args ...any) error { return cliutil.Usage(c, format, args...) }
			return run(c.App.Writer, newRequest(c), usage)
		},
	}
}

// Request is a parsed clone command line: the flags' values and the
// arguments after them.
type Request struct {
	Reflink                    string
	Force, NoSync, JSON, Quiet bool
	Probe                      bool
	Count, Start               int
	CountSet, StartSet         bool // given on the command line
	Args                       []string
}

// newRequest reads clone's flags and arguments from c.
func newRequest(c *cli.Context) Request {
	return Request{
		Reflink:  c.String("reflink"),
		Force:    c.Bool("force"),
		NoSync:   c.Bool("no-sync"),
		JSON:     c.Bool("json"),
		Quiet:    c.Bool("quiet"),
		Probe:    c.Bool("probe"),
		Count:    c.Int("count"),
		Start:    c.Int("start"),
		CountSet: c.IsSet("count"),
		StartSet: c.IsSet("start"),
		Args:     c.Args().Slice(),
	}
}
