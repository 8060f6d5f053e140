// Package clonecmd is gvx-vol's clone verb: O(1) copy-on-write clones of
// golden volumes (an episode's reset), one at a time or many at once. All
// logic is in package reflink; this file parses flags and prints.
package clonecmd

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/reflink"
)

// Commands returns the clone verb.
func Commands() []*cli.Command { return []*cli.Command{command()} }

func command() *cli.Command {
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
			&cli.IntFlag{Name: "start", Usage: "first index with --count", DefaultText: "0"},
			&cli.BoolFlag{Name: "no-sync", Usage: "skip the fsyncs (most of the latency): for scratch episode volumes only; a crash may lose DST"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON (method and latency per clone)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing on success"},
			&cli.BoolFlag{Name: "probe", Usage: "only tell whether each DIR argument can clone"},
		},
		Action: run,
	}
}

// cloneJSON is one clone in --json output.
type cloneJSON struct {
	Src       string         `json:"src"`
	Dst       string         `json:"dst"`
	Method    reflink.Method `json:"method"`
	Size      int64          `json:"size"`
	Copied    int64          `json:"copied"`
	LatencyNS int64          `json:"latency_ns"`
	LatencyMS float64        `json:"latency_ms"`
	// Fallback says why --reflink=auto copied instead of cloning.
	Fallback string `json:"fallback,omitempty"`
}

type resultJSON struct {
	Mode    string      `json:"mode"`
	Clones  []cloneJSON `json:"clones"`
	TotalMS float64     `json:"total_ms"`
	Error   string      `json:"error,omitempty"`
}

func run(c *cli.Context) error {
	if c.Bool("probe") {
		return probe(c)
	}
	mode, err := reflink.ParseMode(c.String("reflink"))
	if err != nil {
		return cliutil.Usage(c, "--reflink=%s: want always, auto or never", c.String("reflink"))
	}
	if c.NArg() != 2 {
		for _, a := range c.Args().Slice() {
			if strings.HasPrefix(a, "-") {
				return cliutil.Usage(c, "flags go before SRC and DST (got %q after them)", a)
			}
		}
		return cliutil.Usage(c, "clone takes SRC and DST, got %d arguments", c.NArg())
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	dsts, err := destinations(c, src, dst)
	if err != nil {
		return err
	}

	opts := reflink.Options{Mode: mode, Overwrite: c.Bool("force"), NoSync: c.Bool("no-sync")}
	out := resultJSON{Mode: mode.String(), Clones: []cloneJSON{}}
	start := time.Now()
	var cerr error
	for _, d := range dsts {
		t0 := time.Now()
		res, err := reflink.CloneFile(src, d, opts)
		lat := time.Since(t0)
		if err != nil {
			cerr = explain(err, d, len(out.Clones), len(dsts))
			break
		}
		cj := cloneJSON{
			Src: src, Dst: d, Method: res.Method, Size: res.Size, Copied: res.Copied,
			LatencyNS: lat.Nanoseconds(), LatencyMS: ms(lat),
		}
		if res.Fallback != nil {
			cj.Fallback = res.Fallback.Reason()
		}
		out.Clones = append(out.Clones, cj)
		if !c.Bool("json") && !c.Bool("quiet") {
			what := "clone"
			if res.Method == reflink.MethodCopy {
				what = "sparse copy (" + cliutil.FormatSize(res.Copied) + " of data"
				if res.Fallback != nil {
					what += "; could not clone: " + res.Fallback.Reason()
				}
				what += ")"
			}
			fmt.Fprintf(c.App.Writer, "%s: %s of %s (%s) in %.3f ms\n", d, what, src, cliutil.FormatSize(res.Size), ms(lat))
		}
	}
	if c.Bool("json") {
		out.TotalMS = ms(time.Since(start))
		if cerr != nil {
			out.Error = cerr.Error()
		}
		if err := cliutil.PrintJSON(c.App.Writer, out); err != nil {
			return err
		}
	}
	return cerr
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// maxCount bounds --count: far more episodes than a host runs, far fewer
// names than would strain memory.
const maxCount = 1 << 20

// intVerb is one printf verb for an integer, as in ep-%04d.ext4.
var intVerb = regexp.MustCompile(`%[-+ 0#]*[0-9]*d`)

// destinations expands DST into the list of files to make.
func destinations(c *cli.Context, src, dst string) ([]string, error) {
	pattern := strings.ReplaceAll(dst, "%%", "")
	verbs := intVerb.FindAllStringIndex(pattern, -1)
	if !c.IsSet("count") {
		if strings.Contains(pattern, "%") {
			return nil, cliutil.Usage(c, "DST %q holds a %% verb: give --count N to make N clones (or write %%%% for a literal %%)", dst)
		}
		if c.IsSet("start") {
			return nil, cliutil.Usage(c, "--start needs --count")
		}
		if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		return []string{dst}, nil
	}
	n, first := c.Int("count"), c.Int("start")
	if n < 1 || n > maxCount || first < 0 || first > math.MaxInt32 {
		return nil, cliutil.Usage(c, "--count must be 1..%d and --start 0..%d", maxCount, math.MaxInt32)
	}
	if len(verbs) != 1 || strings.Count(pattern, "%") != 1 {
		return nil, cliutil.Usage(c, "with --count, DST must hold exactly one integer verb such as %%04d (got %q)", dst)
	}
	dsts := make([]string, n)
	for i := range dsts {
		dsts[i] = fmt.Sprintf(dst, first+i)
	}
	return dsts, nil
}

// explain turns library errors into advice in gvx-vol's terms.
func explain(err error, dst string, done, total int) error {
	var prefix string
	if total > 1 {
		prefix = fmt.Sprintf("made %d of %d clones, then: ", done, total)
	}
	var nse *reflink.NotSupportedError
	switch {
	case errors.As(err, &nse):
		return fmt.Errorf("%scannot clone %s to %s: %s\n  use --reflink=auto to fall back to a sparse copy, or %s",
			prefix, nse.Src, nse.Dst, nse.Reason(), reflink.Remedy)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s%s already exists; --force replaces it", prefix, dst)
	}
	return fmt.Errorf("%s%w", prefix, err)
}

// probe reports, for each DIR argument, whether it can clone.
func probe(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usage(c, "--probe takes one or more directories")
	}
	type probeJSON struct {
		Dir      string `json:"dir"`
		CanClone bool   `json:"can_clone"`
		Reason   string `json:"reason,omitempty"`
	}
	var res []probeJSON
	var failed error
	for _, dir := range c.Args().Slice() {
		p := probeJSON{Dir: dir, CanClone: true}
		if err := reflink.Probe(dir); err != nil {
			p.CanClone = false
			var nse *reflink.NotSupportedError
			if errors.As(err, &nse) {
				p.Reason = nse.Reason()
				failed = fmt.Errorf("%s cannot clone: %s; %s", dir, p.Reason, reflink.Remedy)
			} else {
				p.Reason = err.Error()
				failed = err
			}
		}
		res = append(res, p)
		if !c.Bool("json") && !c.Bool("quiet") {
			if p.CanClone {
				fmt.Fprintf(c.App.Writer, "%s: can clone\n", dir)
			} else {
				fmt.Fprintf(c.App.Writer, "%s: cannot clone: %s\n", dir, p.Reason)
			}
		}
	}
	if c.Bool("json") {
		if err := cliutil.PrintJSON(c.App.Writer, res); err != nil {
			return err
		}
	}
	return failed
}
