// Package poolcmd is rungv's pool verb: N episodes of one image, J at a
// time, each on its own clone of a golden volume (gvx.Pool, for scripts).
package poolcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/specflags"
	"z.gfire.dev/gvx/internal/units"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// Command is `rungv pool`.
var Command = &cli.Command{
	Name:      "pool",
	Usage:     "run N episodes of IMAGE, J at a time, each on its own clone of a golden volume",
	ArgsUsage: "IMAGE [COMMAND] [ARG...]",
	Description: `Each episode clones the golden volume into --scratch (a reflink: put both on
XFS, Btrfs or APFS), mounts the clone at --volume-path (/var/lib/docker), runs
COMMAND with GVX_EPISODE set to its number, and is torn down when it exits or
its --timeout passes: the sandbox is killed and the clone removed. With
--ready TEXT an episode counts as ready once its standard output holds TEXT.

Each episode is what rungv run would run with the same flags: the episode
flags (-e, --entrypoint, --mount, -m, --cpus, --network, --egress, --pull,
--isolation, …) are rungv run's, with the same names, defaults and parsing
(see rungv run --help), but for -p (every episode would publish on the same
socket). As with rungv run, --network nat is the default, and a NAT guest
reaches the outside world only (never the host's loopback, link-local and
private ranges or its own addresses) unless --allow-host-port and --egress
allow=CIDR[:PORTS] open more; --network none makes the episodes offline.
--spec FILE gives every episode's whole spec instead (docs/runtime.md, "The
episode spec"); the pool adds the clone's mount and GVX_EPISODE to it.

--ready-docker publishes each episode's guest port 2375 (dockerd's TCP
listener) as a unix socket of its own in --scratch, and counts the episode
ready once GET /info (what docker info asks) answers through it: the
daemon is ready for a client on the host.

--warm W keeps W episodes booted ahead of demand (cloned, started, ready)
and hands one over to each episode as it begins; its replacement boots in
the background. The pool warms up before the clock starts; then the claim
latency (asking for an episode → handed over: a ready warm one at once,
else the wait for the next) is reported apart from the boot latency
(ready). --warm-memory SIZE caps what the waiting warm
episodes hold together: each one's idle memory (PSS of its processes) is
measured once it is ready, and the pool keeps only as many as fit.
A claimed episode's replacement waits --refill-delay (250ms) and boots at
--refill-nice (10, the nice of the episode's own autogroups) until it is
ready, so that the claims have the CPUs first; -1s and -1 turn them off.

Examples:
   rungv pool --golden golden.ext4 --scratch /srv/eps -n 8 -j 4 --json \
       oci:/srv/images/busybox sh -c 'ls /var/lib/docker'
   # Docker episodes, 4 kept warm, each held 10 s once claimed:
   rungv pool --golden golden-docker.ext4 --scratch /srv/eps -n 16 -j 4 \
       --warm 4 --warm-memory 8g --ready-docker --kill-after 10s \
       -e DOCKER_TLS_CERTDIR= oci:/srv/images/dind --tls=false

Exit status: 0 if every episode exited 0, 1 otherwise, 2 for a usage error,
125 when the pool cannot start (a missing golden volume, no reflink).`,
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "golden", Required: true, Usage: "golden ext4 volume `FILE` (never written)"},
		&cli.StringFlag{Name: "scratch", Required: true, Usage: "`DIR` for the clones (same filesystem as the golden volume)"},
		&cli.IntFlag{Name: "episodes", Aliases: []string{"n"}, Value: 1, Usage: "episodes to run"},
		&cli.IntFlag{Name: "parallel", Aliases: []string{"j"}, Value: 1, Usage: "episodes at a time"},
		&cli.StringFlag{Name: "volume-path", Value: gvx.DefaultVolumePath, Usage: "where the clone is mounted in the guest"},
		&cli.DurationFlag{Name: "timeout", Usage: "per-episode limit, clone to teardown (0: none)"},
		&cli.StringFlag{Name: "ready", Usage: "an episode is ready once its stdout contains `TEXT` (ready latency)"},
		&cli.DurationFlag{Name: "kill-after", Usage: "end each episode this long after it is ready, killing a guest that still runs (a daemon workload); 0: wait for the guest to exit"},
		&cli.StringFlag{Name: "clone", Value: "always", Usage: "reflink mode: always (refuse to copy), auto (copy where cloning fails)"},
		&cli.BoolFlag{Name: "json", Usage: "print per-episode metrics and a summary as JSON (guest output goes into it)"},
		&cli.BoolFlag{Name: "ready-docker", Usage: "publish each episode's guest port 2375 as its own socket; ready once docker info answers through it"},
		&cli.IntFlag{Name: "warm", Usage: "keep `W` episodes booted ahead of demand (cloned, started, ready); each episode is a claim of one"},
		&cli.DurationFlag{Name: "refill-delay", Usage: "a claimed warm episode's replacement waits `D` before it boots (-1s: not at all)", DefaultText: "250ms"},
		&cli.IntFlag{Name: "refill-nice", Usage: "warm boots run at nice `N` (1–19) until ready (-1: at the pool's)", DefaultText: "10"},
		&cli.StringFlag{Name: "warm-memory", Usage: "cap the idle memory of the waiting warm episodes together at `SIZE` (e.g. 8g; measured PSS)"},
		// The pool's old name for --memory, in bytes.
		&cli.Int64Flag{Name: "memory-bytes", Hidden: true, Usage: "memory each guest sees, in bytes (use --memory)"},
	}, specflags.Flags("publish")...),
	Action: run,
}

// episodeJSON is one episode in --json output. Durations are milliseconds.
type episodeJSON struct {
	Episode        int     `json:"episode"`
	ExitCode       int     `json:"exit_code"`
	ResetMS        float64 `json:"reset_ms"`
	ClaimMS        float64 `json:"claim_ms"`
	Warm           bool    `json:"warm"`
	ReadyMS        float64 `json:"ready_ms"`
	RunMS          float64 `json:"run_ms"`
	TeardownMS     float64 `json:"teardown_ms"`
	TotalMS        float64 `json:"total_ms"`
	CloneMethod    string  `json:"clone_method,omitempty"`
	CloneBytes     int64   `json:"clone_bytes"`
	AllocatedBytes int64   `json:"allocated_bytes"`
	IdleMemory     int64   `json:"idle_memory_bytes"`
	IdleMemoryPSS  bool    `json:"idle_memory_pss"`
	Error          string  `json:"error,omitempty"`
	Stdout         string  `json:"stdout,omitempty"`
	Stderr         string  `json:"stderr,omitempty"`
}

type quantJSON struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	Max float64 `json:"max_ms"`
}

type summaryJSON struct {
	Episodes       int       `json:"episodes"`
	Failed         int       `json:"failed"`
	Parallel       int       `json:"parallel"`
	WallMS         float64   `json:"wall_ms"`
	PerMinute      float64   `json:"episodes_per_minute"`
	WarmupMS       float64   `json:"warmup_ms"`
	Warm           int       `json:"warm"`
	Reset          quantJSON `json:"reset"`
	Claim          quantJSON `json:"claim"`
	Ready          quantJSON `json:"ready"`
	Run            quantJSON `json:"run"`
	Teardown       quantJSON `json:"teardown"`
	Total          quantJSON `json:"total"`
	AllocatedBytes int64     `json:"allocated_bytes_p50"`
	IdleMemory     int64     `json:"idle_memory_bytes_p50"`
	IdleMemoryMax  int64     `json:"idle_memory_bytes_max"`
	IdleMemoryPSS  bool      `json:"idle_memory_pss"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func quant(q gvx.Quantiles) quantJSON { return quantJSON{ms(q.P50), ms(q.P95), ms(q.Max)} }

func bad(format string, a ...any) error {
	return cli.Exit(verb+": "+fmt.Sprintf(format, a...), 125)
}

// verb prefixes rungv pool's messages.
const verb = "rungv pool"

// episodeSpec is every episode's spec: from --spec FILE, or rungv run's
// flags (but -p: every episode would publish on the same host socket).
func episodeSpec(c *cli.Context) (*spec.Spec, error) {
	if c.IsSet("memory-bytes") {
		if c.IsSet("memory") || c.IsSet(specflags.SpecFile) {
			return nil, specflags.Usage(verb, "--memory-bytes is the old name of --memory: give one, and not beside --spec")
		}
		if err := c.Set("memory", strconv.FormatInt(c.Int64("memory-bytes"), 10)); err != nil {
			return nil, specflags.Usage(verb, "--memory-bytes: %v", err)
		}
	}
	s, err := specflags.Spec(c, verb)
	if err != nil {
		return nil, err
	}
	if len(s.Ports) > 0 {
		return nil, specflags.Usage(verb, "the spec publishes ports: every episode of a pool would publish on the same host socket")
	}
	return s, nil
}

func run(c *cli.Context) error {
	s, err := episodeSpec(c)
	if err != nil {
		return err
	}
	n, j := c.Int("episodes"), c.Int("parallel")
	if n < 1 || j < 1 {
		return specflags.Usage(verb, "-n and -j must be at least 1")
	}
	mode, err := reflink.ParseMode(c.String("clone"))
	if err != nil || mode == reflink.Never {
		return specflags.Usage(verb, "--clone must be always or auto")
	}
	self, err := os.Executable()
	if err != nil {
		return bad("cannot find this rungv binary: %v", err)
	}
	base := gvx.Config{Rungv: self}
	asJSON := c.Bool("json")
	if !asJSON {
		base.Stdout, base.Stderr = os.Stdout, os.Stderr
	}
	cfg := gvx.PoolConfig{
		Golden:     c.String("golden"),
		ScratchDir: c.String("scratch"),
		GuestPath:  c.String("volume-path"),
		Parallel:   j,
		Base:       base,
		Spec:       s,
		Timeout:    c.Duration("timeout"),
		CloneMode:  mode,
	}
	if asJSON {
		cfg.OutputLimit = 64 << 10
	}
	text := c.String("ready")
	switch {
	case text != "" && c.Bool("ready-docker"):
		return specflags.Usage(verb, "give --ready or --ready-docker, not both")
	case text != "":
		cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, text) }
	case c.Bool("ready-docker"):
		cfg.Sockets = map[string]int{dockerSocket: 2375}
		cfg.Ready = gvx.DockerReady(dockerSocket)
	}
	if cfg.Warm = c.Int("warm"); cfg.Warm < 0 {
		return specflags.Usage(verb, "--warm must be 0 or more")
	}
	if d := c.Duration("refill-delay"); d < 0 {
		cfg.RefillDelay = -1
	} else {
		cfg.RefillDelay = d
	}
	if cfg.RefillNice = c.Int("refill-nice"); cfg.RefillNice > 19 || cfg.RefillNice < -1 {
		return specflags.Usage(verb, "--refill-nice %d: want 1..19, or -1 for none", cfg.RefillNice)
	}
	if m := c.String("warm-memory"); m != "" {
		if cfg.WarmMemory, err = units.ParseSize(m); err != nil || cfg.WarmMemory <= 0 || cfg.Warm == 0 {
			return specflags.Usage(verb, "--warm-memory %q: want a size such as 8g, with --warm", m)
		}
	}
	pool, err := gvx.NewPool(cfg)
	if err != nil {
		return bad("%v", err)
	}
	defer pool.Close()

	// SIGINT/SIGTERM cancel the run: every running episode is torn down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var warmup time.Duration
	if cfg.Warm > 0 {
		t := time.Now()
		if err := pool.WaitWarm(ctx); err != nil {
			return bad("warming up: %v", err)
		}
		warmup = time.Since(t)
	}
	start := time.Now()
	killAfter := c.Duration("kill-after")
	metrics, _ := pool.Run(ctx, n, func(ctx context.Context, ep *gvx.Episode) error {
		if killAfter > 0 {
			select {
			case <-time.After(killAfter):
				return nil // the pool kills the guest
			case <-ep.Done():
			}
		}
		code, err := ep.Wait(ctx)
		if err == nil && code != 0 {
			err = fmt.Errorf("guest exited with status %d", code)
		}
		return err
	})
	wall := time.Since(start)
	if err := pool.Close(); err != nil {
		fmt.Fprintln(c.App.ErrWriter, "rungv pool:", err)
	}
	sum := gvx.Summarize(metrics, j, wall)
	if asJSON {
		if err := printJSON(c.App.Writer, metrics, sum, warmup); err != nil {
			return err
		}
	} else {
		printText(c.App.ErrWriter, metrics, sum)
	}
	if sum.Failed > 0 {
		return cli.Exit("", 1)
	}
	return nil
}

// dockerSocket names the socket --ready-docker publishes.
const dockerSocket = "docker"

func printJSON(w io.Writer, metrics []gvx.Metrics, s gvx.Summary, warmup time.Duration) error {
	out := struct {
		Episodes []episodeJSON `json:"episodes"`
		Summary  summaryJSON   `json:"summary"`
	}{Summary: summaryJSON{
		Episodes: s.Episodes, Failed: s.Failed, Parallel: s.Parallel, WallMS: ms(s.Wall), PerMinute: s.PerMinute,
		WarmupMS: ms(warmup), Warm: s.Warm, Claim: quant(s.Claim),
		Reset: quant(s.Reset), Ready: quant(s.Ready), Run: quant(s.Run), Teardown: quant(s.Teardown), Total: quant(s.Total),
		AllocatedBytes: s.AllocatedBytes, IdleMemory: s.IdleMemory, IdleMemoryMax: s.IdleMemoryMax, IdleMemoryPSS: s.IdleMemoryPSS,
	}}
	for _, m := range metrics {
		e := episodeJSON{
			Episode: m.Episode, ExitCode: m.ExitCode,
			ResetMS: ms(m.Reset), ClaimMS: ms(m.Claim), Warm: m.Warm, ReadyMS: ms(m.Ready),
			IdleMemory: m.IdleMemory, IdleMemoryPSS: m.IdleMemoryPSS, RunMS: ms(m.Run), TeardownMS: ms(m.Teardown), TotalMS: ms(m.Total),
			CloneBytes: m.CloneBytes, AllocatedBytes: m.AllocatedBytes,
			Stdout: string(m.Stdout), Stderr: string(m.Stderr),
		}
		if m.CloneMethod != 0 {
			e.CloneMethod = m.CloneMethod.String()
		}
		if m.Err != nil {
			e.Error = m.Err.Error()
		}
		out.Episodes = append(out.Episodes, e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printText(w io.Writer, metrics []gvx.Metrics, s gvx.Summary) {
	for _, m := range metrics {
		status := "ok"
		if m.Err != nil {
			status = m.Err.Error()
		}
		fmt.Fprintf(w, "episode %d: reset %.1fms claim %.0fms ready %.0fms run %.0fms teardown %.1fms wrote %s idle %s: %s\n",
			m.Episode, ms(m.Reset), ms(m.Claim), ms(m.Ready), ms(m.Run), ms(m.Teardown), kib(m.AllocatedBytes), kib(m.IdleMemory), status)
	}
	fmt.Fprintf(w, "%d episodes (%d failed, %d warm), %d at a time, in %.2fs: %.1f/min; reset p50 %.1fms, claim p50 %.0fms, ready p50 %.0fms, teardown p50 %.1fms, idle memory p50 %s\n",
		s.Episodes, s.Failed, s.Warm, s.Parallel, s.Wall.Seconds(), s.PerMinute, ms(s.Reset.P50), ms(s.Claim.P50), ms(s.Ready.P50), ms(s.Teardown.P50), kib(s.IdleMemory))
}

func kib(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
