//go:build unix

// Command cmdtime times whole processes side by side: each round runs
// every command line once, in turn, so a burst of other work on a shared
// machine lands on all of them alike instead of on whichever block of runs
// hyperfine happened to be in (bench/clone.sh's ratios). It prints, per
// command, the wall time of fork, exec and wait (median, 25th percentile,
// minimum), the median of its minor page faults (rusage), and its median
// and minimum over the last command's, the reference. docs/gvx-vol.md
// ("Start-up") uses it for gvx-vol clone against cp --reflink=always.
//
// Each command line is split at spaces (no quoting); -rm names a file
// removed before every run, untimed (a clone's destination). Any command
// failing stops it with that command's output.
//
// usage: cmdtime [-n 200] [-warmup 3] [-rm FILE] 'CMD ARGS...' ... 'REFERENCE ARGS...'
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	wall   time.Duration
	minflt int64
}

func main() {
	rounds := flag.Int("n", 200, "timed rounds")
	warmup := flag.Int("warmup", 3, "untimed rounds first")
	rm := flag.String("rm", "", "`FILE` to remove before each run (untimed)")
	flag.Parse()
	if flag.NArg() == 0 || *rounds < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "usage: cmdtime [-n ROUNDS] [-warmup N] [-rm FILE] 'CMD ARGS...' ... 'REFERENCE ARGS...'")
		os.Exit(2)
	}
	cmds := make([][]string, flag.NArg())
	for i, c := range flag.Args() {
		if cmds[i] = strings.Fields(c); len(cmds[i]) == 0 {
			fmt.Fprintf(os.Stderr, "cmdtime: command %d is empty\n", i+1)
			os.Exit(2)
		}
	}
	res := make([][]sample, len(cmds))
	for r := range *warmup + *rounds {
		for i, argv := range cmds {
			if *rm != "" {
				if err := os.Remove(*rm); err != nil && !os.IsNotExist(err) {
					fmt.Fprintf(os.Stderr, "cmdtime: -rm: %v\n", err)
					os.Exit(1)
				}
			}
			s, err := run(argv)
			if err != nil {
				fmt.Fprintf(os.Stderr, "cmdtime: %s: %v\n", strings.Join(argv, " "), err)
				os.Exit(1)
			}
			if r >= *warmup {
				res[i] = append(res[i], s)
			}
		}
	}
	ref := summarize(res[len(res)-1])
	fmt.Printf("%d rounds, load average %s\n", *rounds, loadavg())
	fmt.Printf("%-8s %-8s %-8s %-7s %-9s %-9s %s\n", "median", "p25", "min", "faults", "med/ref", "min/ref", "command (ms; the last is the reference)")
	for i, argv := range cmds {
		s := summarize(res[i])
		fmt.Printf("%-8.3f %-8.3f %-8.3f %-7d %-9.2f %-9.2f %s\n", ms(s.median), ms(s.p25), ms(s.min), s.faults,
			float64(s.median)/float64(ref.median), float64(s.min)/float64(ref.min), strings.Join(argv, " "))
	}
}

// run runs argv once and returns its wall time and minor faults.
func run(argv []string) (sample, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return sample{}, fmt.Errorf("%v\n%s", err, out.String())
	}
	var minflt int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		minflt = ru.Minflt
	}
	return sample{wall, minflt}, nil
}

type summary struct {
	median, p25, min time.Duration
	faults           int64
}

func summarize(ss []sample) summary {
	w := make([]time.Duration, len(ss))
	f := make([]int64, len(ss))
	for i, s := range ss {
		w[i], f[i] = s.wall, s.minflt
	}
	slices.Sort(w)
	slices.Sort(f)
	return summary{median: w[len(w)/2], p25: w[len(w)/4], min: w[0], faults: f[len(f)/2]}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
