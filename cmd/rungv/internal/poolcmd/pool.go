// Package poolcmd is rungv's pool verb: N episodes of one image, J at a
// time, each on its own clone of a golden volume (gvx.Pool, for scripts).
package poolcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/runtime"
	"z.gfire.dev/gvx/runtime/egress"
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

Episodes are offline (--network none) unless --network nat; then, as with
rungv run, they reach the outside world only (never the host's loopback,
link-local and private ranges or its own addresses) unless --allow-host-port
and --egress allow=CIDR[:PORTS] open more; deny=CIDR[:PORTS] rules win.

Example:
   rungv pool --golden golden.ext4 --scratch /srv/eps -n 8 -j 4 --json \
       oci:/srv/images/busybox sh -c 'ls /var/lib/docker'

Exit status: 0 if every episode exited 0, 1 otherwise, 125 for bad options.`,
	Flags: []cli.Flag{
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
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set an environment variable (`KV`: KEY=VALUE)"},
		&cli.StringFlag{Name: "entrypoint", Usage: "replace the image's entrypoint"},
		&cli.StringSliceFlag{Name: "mount", Usage: "extra mount `SPEC`: type=bind|tmpfs|volume,src=…,dst=…[,readonly] (shared by all episodes)"},
		&cli.StringFlag{Name: "network", Value: "none", Usage: "guest network: none, nat"},
		&cli.StringSliceFlag{Name: "egress", Usage: "NAT egress `RULE`: allow=CIDR[:PORTS] or deny=CIDR[:PORTS] (repeatable; deny rules win; see rungv run --help)"},
		&cli.IntSliceFlag{Name: "allow-host-port", Usage: "let NAT guests reach the host's 127.0.0.1:`PORT` as 10.0.2.2:PORT (repeatable)"},
		&cli.IntFlag{Name: "nat-max-relays", Value: runtime.DefaultNATMaxRelays, Usage: "most TCP connections and UDP flows each NAT guest holds at once"},
		&cli.Int64Flag{Name: "memory-bytes", Usage: "memory each guest sees, in bytes"},
		&cli.IntFlag{Name: "pids-limit", Usage: "host tasks each episode may have (0: rungv run's default, 4096; -1: none)"},
		&cli.StringFlag{Name: "limits", Value: "strict", Usage: "strict: refuse memory/CPU limits no host cgroup would enforce; best-effort: run them anyway"},
		&cli.Float64Flag{Name: "cpus", Usage: "CPUs each guest sees"},
		&cli.StringFlag{Name: "platform", Usage: "gVisor platform: systrap (default), ptrace, kvm"},
	},
	Action: run,
}

// episodeJSON is one episode in --json output. Durations are milliseconds.
type episodeJSON struct {
	Episode        int     `json:"episode"`
	ExitCode       int     `json:"exit_code"`
	ResetMS        float64 `json:"reset_ms"`
	ReadyMS        float64 `json:"ready_ms"`
	RunMS          float64 `json:"run_ms"`
	TeardownMS     float64 `json:"teardown_ms"`
	TotalMS        float64 `json:"total_ms"`
	CloneMethod    string  `json:"clone_method,omitempty"`
	CloneBytes     int64   `json:"clone_bytes"`
	AllocatedBytes int64   `json:"allocated_bytes"`
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
	Reset          quantJSON `json:"reset"`
	Ready          quantJSON `json:"ready"`
	Run            quantJSON `json:"run"`
	Teardown       quantJSON `json:"teardown"`
	Total          quantJSON `json:"total"`
	AllocatedBytes int64     `json:"allocated_bytes_p50"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func quant(q gvx.Quantiles) quantJSON { return quantJSON{ms(q.P50), ms(q.P95), ms(q.Max)} }

func bad(format string, a ...any) error {
	return cli.Exit("rungv pool: "+fmt.Sprintf(format, a...), 125)
}

func run(c *cli.Context) error {
	if c.NArg() < 1 {
		return bad("IMAGE is required (try: rungv pool --golden G.ext4 --scratch DIR -n 4 -j 4 oci:DIR sh -c 'ls /var/lib/docker')")
	}
	if l := c.String("limits"); l != "strict" && l != "best-effort" {
		return bad("--limits must be strict or best-effort")
	}
	n, j := c.Int("episodes"), c.Int("parallel")
	if n < 1 || j < 1 {
		return bad("-n and -j must be at least 1")
	}
	mode, err := reflink.ParseMode(c.String("clone"))
	if err != nil || mode == reflink.Never {
		return bad("--clone must be always or auto")
	}
	self, err := os.Executable()
	if err != nil {
		return bad("cannot find this rungv binary: %v", err)
	}
	base := gvx.Config{
		Rungv:    self,
		OCIImage: c.Args().First(),
		Cmd:      c.Args().Tail(),
		Envv:     c.StringSlice("env"),
		Platform: gvx.Platform(c.String("platform")),
		Resources: gvx.Resources{MemoryBytes: c.Int64("memory-bytes"), CPUMillis: int64(c.Float64("cpus") * 1000),
			PidsLimit: c.Int("pids-limit"), BestEffort: c.String("limits") == "best-effort"},
	}
	switch c.String("network") {
	case "none":
	case "nat":
		base.NetworkMode = gvx.NetModeNAT
	default:
		return bad("--network must be none or nat")
	}
	base.Egress = c.StringSlice("egress")
	base.AllowHostPorts = c.IntSlice("allow-host-port")
	if base.NetworkMode != gvx.NetModeNAT && (c.IsSet("egress") || c.IsSet("allow-host-port") || c.IsSet("nat-max-relays")) {
		return bad("--egress, --allow-host-port and --nat-max-relays need --network nat")
	}
	for _, r := range base.Egress {
		if _, err := egress.ParseRule(r); err != nil {
			return bad("--egress: %v", err)
		}
	}
	for _, p := range base.AllowHostPorts {
		if err := egress.CheckHostPort(p); err != nil {
			return bad("--allow-host-port: %v", err)
		}
	}
	if c.IsSet("nat-max-relays") {
		if base.NATMaxRelays = c.Int("nat-max-relays"); base.NATMaxRelays < 1 {
			return bad("--nat-max-relays %d: want 1 or more (default %d)", base.NATMaxRelays, runtime.DefaultNATMaxRelays)
		}
	}
	if c.IsSet("entrypoint") {
		base.EntrypointSet = true
		if e := c.String("entrypoint"); e != "" {
			base.Entrypoint = []string{e}
		}
	}
	for _, s := range c.StringSlice("mount") {
		m, err := parseMount(s)
		if err != nil {
			return bad("--mount %q: %v", s, err)
		}
		base.Mounts = append(base.Mounts, m)
	}
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
		Timeout:    c.Duration("timeout"),
		CloneMode:  mode,
	}
	if asJSON {
		cfg.OutputLimit = 64 << 10
	}
	if text := c.String("ready"); text != "" {
		cfg.Ready = func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, text) }
	}
	pool, err := gvx.NewPool(cfg)
	if err != nil {
		return bad("%v", err)
	}
	defer pool.Close()

	// SIGINT/SIGTERM cancel the run: every running episode is torn down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
		if err := printJSON(c.App.Writer, metrics, sum); err != nil {
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

func printJSON(w io.Writer, metrics []gvx.Metrics, s gvx.Summary) error {
	out := struct {
		Episodes []episodeJSON `json:"episodes"`
		Summary  summaryJSON   `json:"summary"`
	}{Summary: summaryJSON{
		Episodes: s.Episodes, Failed: s.Failed, Parallel: s.Parallel, WallMS: ms(s.Wall), PerMinute: s.PerMinute,
		Reset: quant(s.Reset), Ready: quant(s.Ready), Run: quant(s.Run), Teardown: quant(s.Teardown), Total: quant(s.Total),
		AllocatedBytes: s.AllocatedBytes,
	}}
	for _, m := range metrics {
		e := episodeJSON{
			Episode: m.Episode, ExitCode: m.ExitCode,
			ResetMS: ms(m.Reset), ReadyMS: ms(m.Ready), RunMS: ms(m.Run), TeardownMS: ms(m.Teardown), TotalMS: ms(m.Total),
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
		fmt.Fprintf(w, "episode %d: reset %.1fms ready %.0fms run %.0fms teardown %.1fms wrote %s: %s\n",
			m.Episode, ms(m.Reset), ms(m.Ready), ms(m.Run), ms(m.Teardown), kib(m.AllocatedBytes), status)
	}
	fmt.Fprintf(w, "%d episodes (%d failed), %d at a time, in %.2fs: %.1f/min; reset p50 %.1fms, ready p50 %.0fms, teardown p50 %.1fms\n",
		s.Episodes, s.Failed, s.Parallel, s.Wall.Seconds(), s.PerMinute, ms(s.Reset.P50), ms(s.Ready.P50), ms(s.Teardown.P50))
}

func kib(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// parseMount parses "type=bind|tmpfs|volume,src=…,dst=…[,readonly]" into a
// gvx.Mount (rungv run parses the same syntax again in each episode).
func parseMount(s string) (gvx.Mount, error) {
	var m gvx.Mount
	for _, kv := range strings.Split(s, ",") {
		k, v, hasV := strings.Cut(kv, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "type":
			switch v {
			case "volume":
				m.Kind = gvx.MountVolume
			case "bind":
				m.Kind = gvx.MountBind
			case "tmpfs":
				m.Kind = gvx.MountTmpfs
			default:
				return m, errors.New("type must be volume, bind or tmpfs")
			}
		case "src", "source":
			m.ImagePath = v
		case "dst", "destination", "target":
			m.GuestPath = v
		case "readonly", "ro":
			m.ReadOnly = !hasV || v == "true" || v == "1"
		default:
			return m, fmt.Errorf("unknown key %q", k)
		}
	}
	return m, nil
}
