// Package servecmd is rungv's serve verb: the episode server of package
// z.gfire.dev/gvx/serve, listening on a unix socket (and, with a token, on
// TCP) until SIGINT or SIGTERM.
package servecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/internal/units"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/serve"
)

// Command is `rungv serve`.
var Command = &cli.Command{
	Name:  "serve",
	Usage: "serve episodes over an HTTP API (unix socket; TCP with a bearer token)",
	Description: `rungv serve owns this node's episodes: clients create them (from an image and
a golden volume, cloned by reflink), exec in them, move files, and close them
over HTTP+JSON (docs/api.md). One server per node; it refuses episodes past
--max-episodes (429 + Retry-After), tears each down when its --ttl passes or
its client stops renewing its --lease, and at start reaps what a SIGKILLed
predecessor left in --state-dir.

The unix socket (default STATE_DIR/serve.sock) is mode 0600. --listen adds a
TCP listener, which needs a bearer token (--token-file, or $GVX_SERVE_TOKEN).
On start one JSON line goes to stdout: {"socket": …, "listen": …, "pid": …}.

--warm FILE keeps episodes booted ahead of demand: FILE holds a JSON list of
{"count": W, "request": CREATE-REQUEST}; the server keeps W episodes of each
request booted (cloned, started, the agent answering and, with "docker":
true, docker info answering through the episode's socket), and a POST
/v1/episodes whose request is the same but for ttl and lease is a claim: it
gets one at once ("warm": true, "claim_seconds") and its replacement boots.
Warm episodes waiting are not counted in --max-episodes; claimed ones are.
--warm-memory SIZE caps the idle memory (PSS) of all waiting warm episodes
together: the server learns one episode's cost from its first boot and keeps
no more warm than fit. A claimed episode's replacement boots --refill-delay
(250ms; -1s: none) later, and every warm boot runs at --refill-nice (10; -1:
none) until it is ready or for a second, so that a burst of claims has the
CPUs first.

An episode whose create sets no memory limit gets --default-memory (4g; none:
the host's). Connections are bounded: headers within --read-header-timeout,
a kept-alive connection closed after --idle-timeout, a request cut when its
client sends nothing of its body (--read-timeout) or takes nothing of the
answer (--write-timeout) for that long, and at most --max-conns open per
listener. A request without the token gets 401 and its connection is closed.
rungv and the episode get only the environment they need (PATH, TMPDIR, HOME,
the cache and proxy variables: docs/serve.md), never $GVX_SERVE_TOKEN. Run
the server as a user of its own, not root: as root the sandbox's processes
are host uid 0.

/metrics has gvx_serve_claim_seconds apart from the boot's
gvx_serve_ready_seconds, gvx_serve_warm_memory_bytes, and
gvx_serve_connections(_refused_total).

Examples:
   rungv serve --state-dir /srv/gvx --max-episodes 64
   rungv serve --state-dir /srv/gvx --warm warm.json   # [{"count": 4, "request": {"spec": …, "golden": …, "docker": true}}]
   rungv serve --state-dir /srv/gvx --warm warm.json --warm-memory 8g
   GVX_SERVE_TOKEN=$(cat tok) rungv serve --state-dir /srv/gvx --listen 127.0.0.1:7300`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "state-dir", Value: serve.DefaultStateDir(), Usage: "`DIR` for the lock, episode records, clones and sockets (short path; on the golden volumes' filesystem for reflinks)"},
		&cli.StringFlag{Name: "socket", Usage: "unix socket `PATH` of the API", DefaultText: "STATE_DIR/serve.sock"},
		&cli.StringFlag{Name: "listen", Usage: "also serve on TCP `ADDR` (127.0.0.1:7300); needs a token"},
		&cli.DurationFlag{Name: "refill-delay", Usage: "a claimed warm episode's replacement waits `D` before it boots (-1s: not at all)", DefaultText: "250ms"},
		&cli.StringFlag{Name: "pin-cpus", Value: string(serve.PinPacked), Usage: "when an episode's host processes run on one host CPU, the least used by this server's episodes: `MODE` packed (every live episode, once they are as many as the CPUs), always (one episode never gets more than one) or never; a third less CPU per pinned episode where cross-CPU wake-ups are dear (docs/runtime.md)"},
		&cli.IntFlag{Name: "refill-nice", Usage: "warm boots run at nice `N` (1–19) until ready, at most a second (-1: at the server's)", DefaultText: "10"},
		&cli.StringFlag{Name: "warm-memory", Usage: "cap the idle memory of the waiting warm episodes together at `SIZE` (e.g. 8g; measured PSS)"},
		&cli.StringFlag{Name: "token-file", Usage: "`FILE` holding the bearer token (default: $GVX_SERVE_TOKEN)"},
		&cli.IntFlag{Name: "max-episodes", Value: 16, Usage: "hard cap on live episodes"},
		&cli.DurationFlag{Name: "ttl", Value: time.Hour, Usage: "an episode's lifetime when its create asks for none"},
		&cli.DurationFlag{Name: "max-ttl", Value: 24 * time.Hour, Usage: "the longest lifetime a create may ask for"},
		&cli.DurationFlag{Name: "lease", Value: time.Minute, Usage: "default lease: tear an episode down when no request for it was in flight this long (0: none)"},
		&cli.DurationFlag{Name: "ready-timeout", Value: 2 * time.Minute, Usage: "bound on an episode's start: its clone, boot, agent and (a create with docker and a service) its Docker daemon"},
		&cli.DurationFlag{Name: "retry-after", Value: time.Second, Usage: "what a create refused at the cap is told to wait"},
		&cli.StringFlag{Name: "clone", Value: "always", Usage: "`WHEN` to reflink golden volumes: always (clone or fail: given here, a --state-dir whose filesystem cannot reflink is refused at start; by default the server then copies, with a warning), auto (clone, else sparse copy)"},
		&cli.StringFlag{Name: "rungv", Usage: "rungv `BINARY` that runs the episodes (default: this one)"},
		&cli.StringFlag{Name: "warm", Usage: "keep episodes booted ahead of demand: `FILE` of [{\"count\": W, \"request\": {…}}]"},
		&cli.StringFlag{Name: "default-memory", Usage: "memory limit of an episode whose create sets none: `SIZE` (e.g. 8g; none: the host's); rootless without a delegated cgroup it is best-effort", DefaultText: "4g"},
		&cli.DurationFlag{Name: "read-header-timeout", Usage: "a request's headers must arrive within `D` (a connection that sends none is closed then)", DefaultText: "10s"},
		&cli.DurationFlag{Name: "idle-timeout", Usage: "close a kept-alive connection idle for `D` (-1s: never)", DefaultText: "1m0s"},
		&cli.DurationFlag{Name: "read-timeout", Usage: "end a request whose body sends nothing for `D` (per read: uploads run as long as they progress; -1s: never)", DefaultText: "1m0s"},
		&cli.DurationFlag{Name: "write-timeout", Usage: "end a request whose client takes nothing of the answer for `D` (per write: exec output and downloads stream as long as they are read; -1s: never)", DefaultText: "1m0s"},
		&cli.IntFlag{Name: "max-conns", Usage: "client connections open at once per listener; one more is closed at once (`N`; -1: no cap)", DefaultText: "1024"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no log line per episode event on stderr"},
	},
	Action: action,
}

func action(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit("rungv serve: takes no arguments (see --help)", 2)
	}
	mode, err := reflink.ParseMode(c.String("clone"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("rungv serve: --clone: %v", err), 2)
	}
	token := os.Getenv("GVX_SERVE_TOKEN")
	if f := c.String("token-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if c.String("listen") != "" && token == "" {
		return cli.Exit("rungv "+serve.ErrNoToken.Error(), 2)
	}
	bin := c.String("rungv")
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	cfg := serve.Config{
		StateDir: c.String("state-dir"), Rungv: bin, MaxEpisodes: c.Int("max-episodes"),
		DefaultTTL: c.Duration("ttl"), MaxTTL: c.Duration("max-ttl"), DefaultLease: c.Duration("lease"),
		ReadyTimeout: c.Duration("ready-timeout"), RefillDelay: c.Duration("refill-delay"), RefillNice: c.Int("refill-nice"), PinCPUs: serve.PinMode(c.String("pin-cpus")), RetryAfter: c.Duration("retry-after"), CloneMode: mode, RequireReflink: c.IsSet("clone") && mode == reflink.Always,
		ReadHeaderTimeout: c.Duration("read-header-timeout"), IdleTimeout: c.Duration("idle-timeout"),
		ReadTimeout: c.Duration("read-timeout"), WriteTimeout: c.Duration("write-timeout"), MaxConns: c.Int("max-conns"),
	}
	if c.IsSet("read-header-timeout") && cfg.ReadHeaderTimeout <= 0 {
		return cli.Exit("rungv serve: --read-header-timeout must be positive (it is what cuts a slowloris)", 2)
	}
	if m := c.String("default-memory"); m != "" {
		if m == "none" {
			cfg.DefaultMemory = -1
		} else if v, err := units.ParseSize(m); err != nil || v <= 0 {
			return cli.Exit(fmt.Sprintf("rungv serve: --default-memory %q: want a size such as 4g, or none", m), 2)
		} else {
			cfg.DefaultMemory = v
		}
	}
	if cfg.DefaultLease == 0 {
		cfg.DefaultLease = -1
	}
	if f := c.String("warm"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cli.Exit(fmt.Sprintf("rungv serve: --warm: %v", err), 2)
		}
		if err := json.Unmarshal(b, &cfg.Warm); err != nil {
			return cli.Exit(fmt.Sprintf("rungv serve: --warm %s: %v (want [{\"count\": 2, \"request\": {\"spec\": {\"image\": …}}}])", f, err), 2)
		}
	}
	if m := c.String("warm-memory"); m != "" {
		var err error
		if cfg.WarmMemory, err = units.ParseSize(m); err != nil || cfg.WarmMemory <= 0 || len(cfg.Warm) == 0 {
			return cli.Exit(fmt.Sprintf("rungv serve: --warm-memory %q: want a size such as 8g, with --warm FILE", m), 2)
		}
	}
	if !c.Bool("quiet") {
		logger := log.New(os.Stderr, "rungv serve: ", log.LstdFlags|log.Lmicroseconds)
		cfg.Logf = logger.Printf
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	sock := c.String("socket")
	if sock == "" {
		sock = filepath.Join(cfg.StateDir, "serve.sock")
	}
	lns := []net.Listener{}
	uln, err := serve.ListenUnix(sock)
	if err != nil {
		return err
	}
	lns = append(lns, uln)
	hello := map[string]any{"socket": sock, "pid": os.Getpid(), "state_dir": cfg.StateDir, "max_episodes": srv.Cap()}
	if addr := c.String("listen"); addr != "" {
		tln, err := serve.ListenTCP(addr)
		if err != nil {
			uln.Close()
			return err
		}
		lns = append(lns, tln)
		hello["listen"] = tln.Addr().String()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		tok := token
		if _, unix := ln.Addr().(*net.UnixAddr); unix {
			tok = "" // the socket's mode guards it
		}
		go func() { errc <- srv.ServeHTTP(ctx, ln, tok) }()
	}
	b, _ := json.Marshal(hello)
	fmt.Fprintln(c.App.Writer, string(b))
	var first error
	for range lns {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop()
		}
	}
	if first != nil && !errors.Is(first, context.Canceled) {
		return first
	}
	return nil
}
