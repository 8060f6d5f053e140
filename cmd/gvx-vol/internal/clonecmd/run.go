package clonecmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/internal/units"
	"z.gfire.dev/gvx/reflink"
)

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

// Result is the --json output of a clone run.
type Result struct {
	Mode    string      `json:"mode"`
	Clones  []cloneJSON `json:"clones"`
	TotalMS float64     `json:"total_ms"`
	Error   string      `json:"error,omitempty"`
}

// run runs the clone verb r, printing to w; usage makes its usage errors.
func run(w io.Writer, r Request, usage func(string, ...any) error) error {
	if r.Probe {
		return probe(w, r, usage)
	}
	mode, err := reflink.ParseMode(r.Reflink)
	if err != nil {
		return usage("--reflink=%s: want always, auto or never", r.Reflink)
	}
	if len(r.Args) != 2 {
		for _, a := range r.Args {
			if strings.HasPrefix(a, "-") {
				return usage("flags go before SRC and DST (got %q after them)", a)
			}
		}
		return usage("clone takes SRC and DST, got %d arguments", len(r.Args))
	}
	src, dst := r.Args[0], r.Args[1]
	dsts, err := destinations(r, src, dst, usage)
	if err != nil {
		return err
	}

	opts := reflink.Options{Mode: mode, Overwrite: r.Force, NoSync: r.NoSync}
	out := Result{Mode: mode.String(), Clones: []cloneJSON{}}
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
		if !r.JSON && !r.Quiet {
			what := "clone"
			if res.Method == reflink.MethodCopy {
				what = "sparse copy (" + units.FormatSize(res.Copied) + " of data"
				if res.Fallback != nil {
					what += "; could not clone: " + res.Fallback.Reason()
				}
				what += ")"
			}
			fmt.Fprintf(w, "%s: %s of %s (%s) in %.3f ms\n", d, what, src, units.FormatSize(res.Size), ms(lat))
		}
	}
	if r.JSON {
		out.TotalMS = ms(time.Since(start))
		if cerr != nil {
			out.Error = cerr.Error()
		}
		if err := cliutil.PrintJSON(w, out); err != nil {
			return err
		}
	}
	return cerr
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// maxCount bounds --count: far more episodes than a host runs, far fewer
// names than would strain memory.
const maxCount = 1 << 20

// destinations expands DST into the list of files to make.
func destinations(r Request, src, dst string, usage func(string, ...any) error) ([]string, error) {
	pattern := strings.ReplaceAll(dst, "%%", "")
	if !r.CountSet {
		if strings.Contains(pattern, "%") {
			return nil, usage("DST %q holds a %% verb: give --count N to make N clones (or write %%%% for a literal %%)", dst)
		}
		if r.StartSet {
			return nil, usage("--start needs --count")
		}
		if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		return []string{dst}, nil
	}
	n, first := r.Count, r.Start
	if n < 1 || n > maxCount || first < 0 || first > math.MaxInt32 {
		return nil, usage("--count must be 1..%d and --start 0..%d", maxCount, math.MaxInt32)
	}
	if !oneIntVerb(pattern) {
		return nil, usage("with --count, DST must hold exactly one integer verb such as %%04d (got %q)", dst)
	}
	dsts := make([]string, n)
	for i := range dsts {
		dsts[i] = fmt.Sprintf(dst, first+i)
	}
	return dsts, nil
}

// oneIntVerb reports whether pattern (with "%%" removed) holds exactly one
// "%" and it starts an integer verb, %[-+ 0#]*[0-9]*d: flags, a width, d.
// (A scanner rather than a regexp: a package-level regexp is compiled at
// every start-up, clone's included.)
func oneIntVerb(pattern string) bool {
	if strings.Count(pattern, "%") != 1 {
		return false
	}
	v := pattern[strings.IndexByte(pattern, '%')+1:]
	v = strings.TrimLeft(v, "-+ 0#")
	v = strings.TrimLeft(v, "0123456789")
	return strings.HasPrefix(v, "d")
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
func probe(w io.Writer, r Request, usage func(string, ...any) error) error {
	if len(r.Args) == 0 {
		return usage("--probe takes one or more directories")
	}
	type probeJSON struct {
		Dir      string `json:"dir"`
		CanClone bool   `json:"can_clone"`
		Reason   string `json:"reason,omitempty"`
	}
	var res []probeJSON
	var failed error
	for _, dir := range r.Args {
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
		if !r.JSON && !r.Quiet {
			if p.CanClone {
				fmt.Fprintf(w, "%s: can clone\n", dir)
			} else {
				fmt.Fprintf(w, "%s: cannot clone: %s\n", dir, p.Reason)
			}
		}
	}
	if r.JSON {
		if err := cliutil.PrintJSON(w, res); err != nil {
			return err
		}
	}
	return failed
}
