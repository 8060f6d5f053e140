// Package runcmd is rungv's run verb.
package runcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/specflags"
	"z.gfire.dev/gvx/runtime"
	"z.gfire.dev/gvx/spec"
)

// Command is `rungv run`.
var Command = &cli.Command{
	Name:      "run",
	Usage:     "run a command in a new episode of IMAGE (oci:DIR[:REF], docker-archive:TAR, or a registry reference)",
	ArgsUsage: "IMAGE [COMMAND] [ARG...]",
	Description: `Runs IMAGE as one episode: gVisor's Sentry with the image's flattened
EROFS rootfs (from the image cache), ext4lite volumes served by rungv's own
gofer extension, and a user-space network. The guest is treated as hostile
(docs/security.md): rungv and its helpers lock themselves down (no
capabilities, no_new_privs, a seccomp allowlist, Landlock) before guest code
runs; it works as any user (it makes its own user and network namespaces)
and leaves nothing behind: no mount, no cgroup, no state directory, no
process, even when SIGKILLed (what a kill of all of it leaves, the next
start sweeps; rungv gc on demand). SIGINT and SIGTERM are passed to the
guest (a graceful stop), which is killed after --stop-timeout (10 s; 0: at
once);
the exit status is the guest's (125: rungv itself failed; 2: a usage error).

Limits bound what the episode costs the host: --pids-limit (default 4096
host tasks) always; -m and --cpus through a host cgroup (root, or a
delegated cgroup v2 subtree), refused elsewhere unless --limits best-effort.
--json's start event names what enforces each.

Entrypoint, command, env, workdir and user merge with the image config as in
docker run. --privileged (the default) gives the guest every capability of
the Sentry (not of the host) and a cgroupfs, what docker:dind needs; a
dockerd-entrypoint.sh command also gets --iptables=false --ip6tables=false
(the Sentry's netstack has no MASQUERADE).

--mount type=volume,src=FILE.ext4,dst=PATH[,readonly][,size=32G] mounts an
ext4lite volume; a missing FILE is created (sparse, size= or 32G). As in
docker, --mount is CSV: quote a field that holds a comma ("src=/a,b").
-p unix:HOSTSOCK:PORT publishes a guest TCP port as a host unix socket that
rungv creates (mode 0600; an existing path is refused unless it is a stale
socket of yours) and removes at the end; the guest gets each connection as
a descriptor and sees no host directory. A volume file is opened once (no
symlink, a regular file of yours; ,allow-foreign for another owner's).

--network nat (the default) gives the guest 10.0.2.15/24 with outbound NAT
through the host's sockets, to the outside world only: the guest never
reaches the host's loopback, link-local addresses (169.254.169.254: cloud
metadata), private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)
or the host's own addresses, unless allowed:
   --allow-host-port 5000           guest 10.0.2.2:5000 = host 127.0.0.1:5000
   --egress allow=10.1.2.3:443      one private address, port 443
   --egress allow=192.168.0.0/16    a LAN, every port
   --egress deny=203.0.113.0/24:25  refuse a range (deny rules always win)
PORTS are 80, 80,443 or 8000-9000; an IPv6 rule with ports takes brackets
([2001:db8::]/32:443). 10.0.2.3:53 is DNS, forwarded only to the host's
first nameserver (reached even on the host's loopback). --nat-max-relays
bounds the guest's open connections and UDP flows. --network none gives
loopback only and the strictest host lockdown.

The flags build one episode spec (docs/runtime.md, "The episode spec"), the
JSON value the Go SDK sends on --spec-fd. --spec FILE reads a whole one
instead; an episode flag, IMAGE or COMMAND beside it is a usage error (the
file is the whole episode), while host-side flags (--json, --log-level,
--cache-dir, --debug-log) still apply. --pull missing (the default) takes
IMAGE from the cache when it is there, always fetches it, never stays
offline.

Examples:
   # a golden /var/lib/docker: a docker:dind seed on a new volume
   rungv run -p unix:/srv/rl-snapshots/seed.sock:2375 \
       --mount type=volume,src=/srv/rl-snapshots/golden-docker.ext4,dst=/var/lib/docker \
       -e DOCKER_TLS_CERTDIR= docker:dind --tls=false &
   DOCKER_HOST=unix:///srv/rl-snapshots/seed.sock docker pull python:3.11-slim
   kill -INT %1; wait

   # an episode on a reflink clone of it, 4 GiB and 2 CPUs
   cp --reflink=always /srv/rl-snapshots/golden-docker.ext4 /srv/rl-episodes/ep-0042.ext4
   rungv run -m 4g --cpus 2 -p unix:/srv/rl-episodes/ep-0042.sock:2375 \
       --mount type=volume,src=/srv/rl-episodes/ep-0042.ext4,dst=/var/lib/docker \
       -e DOCKER_TLS_CERTDIR= docker:dind --tls=false

   rungv run oci:./busybox-layout echo hi
   rungv run --network none --json oci:./img sh -c 'exit 3'   # events as JSON on stderr
   rungv run --spec episode.json                              # the whole episode in a file`,
	Flags: append(specflags.Flags(),
		&cli.IntFlag{Name: "spec-fd", Value: -1, Usage: "read the whole episode as a JSON spec from this open file descriptor `N` (a pipe; what the Go SDK uses), as --spec does from a file"},
		&cli.BoolFlag{Name: "rm", Usage: "remove the episode when it exits (always done; accepted for docker compatibility)"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "keep stdin attached (always done; accepted for docker compatibility)"},
		&cli.IntFlag{Name: "error-fd", Value: -1, Hidden: true, Usage: "also write rungv's own error (not the guest's) to this fd"},
		&cli.StringFlag{Name: "cache-dir", EnvVars: []string{"GVX_CACHE_DIR", "GVX_CACHE"}, Usage: "the image cache (default: $GVX_CACHE, /var/cache/gvx as root, else the user cache dir)"},
		&cli.StringFlag{Name: "debug-log", EnvVars: []string{"RUNGV_DEBUG_LOG"}, Usage: "write runsc debug logs into this directory"},
		&cli.StringFlag{Name: "host-cpus", EnvVars: []string{"RUNGV_HOST_CPUS"}, Usage: "run the episode's host processes (the Sentry, its stubs, the gofer) only on these host CPUs, `LIST` as taskset -c takes it (1 or 0,2 or 0-3); one CPU per episode costs far less CPU where cross-CPU wake-ups are dear (docs/runtime.md); the guest's own CPU count is --cpus"},
		&cli.StringFlag{Name: "profile-dir", EnvVars: []string{"RUNGV_PROFILE_DIR"}, Usage: "write the Sentry's Go CPU profile over the episode's life into `DIR`/<episode id>.cpu.pprof (go tool pprof -top FILE); loosens the Sentry's seccomp filter: for measuring only"},
		&cli.BoolFlag{Name: "json", Usage: "report rungv's own events (start, created volumes, exit or error) as JSON lines on stderr"},
		&cli.StringFlag{Name: "checkpoint-dir", Usage: "prepare the episode to be checkpointed once into `DIR` on a request on --control-fd (rungv checkpoint drives this; --isolation seccomp-only)"},
		&cli.StringFlag{Name: "restore", Usage: "start by restoring the checkpoint in `DIR` (made by rungv checkpoint) onto the --mount volumes (fresh clones of its companion volumes, same targets) instead of running COMMAND; IMAGE must be the checkpointed one (--isolation seccomp-only)"},
		&cli.IntFlag{Name: "control-fd", Value: -1, Usage: "read checkpoint requests (JSON lines, runtime.ControlRequest) from this open socket `N` and answer on it (what rungv checkpoint and the Go SDK's Fork use)"},
		&cli.StringFlag{Name: "stop-timeout", Usage: "how long the guest has to exit after rungv gets SIGTERM or SIGINT before it is killed: seconds (as docker run's) or a Go duration (500ms); 0 kills it at once, what the Go SDK's Close asks for (default 10)"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "rungv's own messages on stderr: error, info, or debug (debug also keeps runsc's logs: see --debug-log)"},
	),
	Action: run,
}

func run(c *cli.Context) error {
	err := runEpisode(c)
	if fd := c.Int("error-fd"); fd >= 0 && err != nil {
		if ec, ok := err.(cli.ExitCoder); ok && ec.Error() != "" {
			f := os.NewFile(uintptr(fd), "error-fd")
			fmt.Fprintln(f, ec.Error())
			f.Close()
		}
	}
	return err
}

// event is one --json line.
type event struct {
	Event   string `json:"event"` // start, volume-created, exit, error
	Time    string `json:"time"`
	Image   string `json:"image,omitempty"`
	Network string `json:"network,omitempty"`
	// Isolation is the mode the episode runs in (namespaces, seccomp-only).
	Isolation string   `json:"isolation,omitempty"`
	Volumes   []string `json:"volumes,omitempty"`
	Limits    string   `json:"limits,omitempty"` // who enforces -m/--cpus
	// Enforcement names what enforces each limit on the host.
	Enforcement map[string]string `json:"enforcement,omitempty"`
	Path        string            `json:"path,omitempty"`
	Bytes       int64             `json:"bytes,omitempty"`
	ExitCode    *int              `json:"exit_code,omitempty"`
	Seconds     float64           `json:"seconds,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// reporter writes rungv's own messages: JSON events with --json, text
// lines at --log-level info and debug.
type reporter struct {
	w     io.Writer
	json  bool
	level int // 0 error, 1 info, 2 debug
}

func (r *reporter) emit(e event, text string) {
	if r.json {
		e.Time = time.Now().UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(e)
		fmt.Fprintf(r.w, "%s\n", b)
		return
	}
	if text != "" && r.level >= 1 {
		fmt.Fprintln(r.w, text)
	}
}

func runEpisode(c *cli.Context) error {
	rep := &reporter{w: c.App.ErrWriter, json: c.Bool("json")}
	switch c.String("log-level") {
	case "error":
	case "info":
		rep.level = 1
	case "debug":
		rep.level = 2
	default:
		return cli.Exit(fmt.Sprintf("rungv run: --log-level %q: want error, info or debug", c.String("log-level")), 125)
	}
	start := time.Now()
	err := runEpisodeReport(c, rep)
	var ec cli.ExitCoder
	var usage *specflags.UsageError
	var notFound execNotFound
	switch {
	case errors.As(err, &notFound):
		rep.emit(event{Event: "error", Error: notFound.Error(), Seconds: time.Since(start).Seconds()}, "")
		if rep.json { // the error is in the event; keep the exit status
			return cli.Exit("", notFound.ExitCode())
		}
	case errors.As(err, &usage):
		rep.emit(event{Event: "error", Error: usage.Error(), Seconds: time.Since(start).Seconds()}, "")
		if rep.json { // the error is in the event; keep the exit status
			return cli.Exit("", usage.ExitCode())
		}
	case err == nil:
		code := 0
		rep.emit(event{Event: "exit", ExitCode: &code, Seconds: time.Since(start).Seconds()}, "")
	case asExit(err, &ec) && ec.ExitCode() != 125:
		code := ec.ExitCode()
		rep.emit(event{Event: "exit", ExitCode: &code, Seconds: time.Since(start).Seconds()}, "")
	default:
		rep.emit(event{Event: "error", Error: err.Error(), Seconds: time.Since(start).Seconds()}, "")
		if rep.json { // the error is in the event; keep the exit status
			code := 125
			if asExit(err, &ec) {
				code = ec.ExitCode()
			}
			return cli.Exit("", code)
		}
	}
	return err
}

// parseStopTimeout reads --stop-timeout: whole seconds, or a Go duration.
// 0 becomes a negative duration (runtime.Host.StopTimeout: at once).
func parseStopTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if n, nerr := strconv.Atoi(v); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--stop-timeout %q: want whole seconds (10) or a duration (500ms), not negative", v)
	}
	if d == 0 {
		d = -1
	}
	return d, nil
}

func asExit(err error, ec *cli.ExitCoder) bool {
	e, ok := err.(cli.ExitCoder)
	if ok {
		*ec = e
	}
	return ok
}

// execNotFound is a guest command the image lacks: exit 127 with
// Docker's words, an error event with --json.
type execNotFound struct{ *runtime.ExecNotFoundError }

func (e execNotFound) Error() string { return verb + ": " + e.ExecNotFoundError.Error() }

// verb prefixes rungv run's messages.
const verb = "rungv run"

// episodeSpec is the episode to run: read whole from --spec-fd or --spec,
// or built from the flags.
func episodeSpec(c *cli.Context) (*spec.Spec, error) {
	fd := c.Int("spec-fd")
	if fd < 0 {
		return specflags.Spec(c, verb)
	}
	if c.IsSet(specflags.SpecFile) {
		return nil, specflags.Usage(verb, "--spec and --spec-fd: give one")
	}
	if fd <= 2 {
		return nil, specflags.Usage(verb, "--spec-fd %d: standard input, output and error are the guest's; pass the spec on another descriptor", fd)
	}
	return specflags.Whole(c, verb, fmt.Sprintf("--spec-fd %d", fd), fmt.Sprintf("--spec-fd %d", fd), func() (*spec.Spec, error) {
		f := os.NewFile(uintptr(fd), "spec-fd")
		if f == nil {
			return nil, fmt.Errorf("not an open descriptor")
		}
		defer f.Close()
		return spec.Decode(f)
	})
}

func runEpisodeReport(c *cli.Context, rep *reporter) error {
	s, err := episodeSpec(c)
	if err != nil {
		return err
	}
	for i, m := range s.Mounts {
		created, err := runtime.CreateMissingVolume(m)
		if err != nil {
			return cli.Exit(fmt.Sprintf("%s: mounts[%d].source: %v", verb, i, err), 125)
		}
		if created {
			size := m.Size
			if size == 0 {
				size = runtime.DefaultVolumeSize
			}
			rep.emit(event{Event: "volume-created", Path: m.Source, Bytes: size},
				fmt.Sprintf("rungv: created %s, a new %d GiB volume (sparse)", m.Source, size>>30))
		}
	}
	if err := s.Validate(); err != nil {
		return specflags.Usage(verb, "%v", err)
	}
	h := runtime.Host{DebugLogDir: c.String("debug-log"), ProfileDir: c.String("profile-dir"), CacheDir: c.String("cache-dir")}
	h.CheckpointDir, h.RestoreFrom = c.String("checkpoint-dir"), c.String("restore")
	if l := c.String("host-cpus"); l != "" {
		cpus, err := parseCPUList(l)
		if err != nil {
			return specflags.Usage(verb, "--host-cpus %q: %v", l, err)
		}
		h.CPUs = cpus
	}
	if fd := c.Int("control-fd"); fd >= 0 {
		if fd <= 2 {
			return specflags.Usage(verb, "--control-fd %d: standard input, output and error are the guest's; pass the socket on another descriptor", fd)
		}
		f := os.NewFile(uintptr(fd), "control-fd")
		defer f.Close()
		h.Control = f
	}
	if v := c.String("stop-timeout"); v != "" {
		d, err := parseStopTimeout(v)
		if err != nil {
			return specflags.Usage(verb, "%v", err)
		}
		h.StopTimeout = d
	}
	if rep.level >= 2 && h.DebugLogDir == "" {
		d, err := os.MkdirTemp("", "rungv-debug-")
		if err != nil {
			return cli.Exit("rungv run: "+err.Error(), 125)
		}
		h.DebugLogDir = d
		fmt.Fprintf(c.App.ErrWriter, "rungv: runsc debug logs in %s\n", d)
	}
	var vols []string
	for _, m := range s.Mounts {
		if m.Type == runtime.MountVolume {
			vols = append(vols, m.Source)
		}
	}
	network := s.Network
	if network == "" {
		network = runtime.NetworkNone
	}
	h.OnStart = func(info runtime.StartInfo) {
		rep.emit(event{Event: "start", Image: s.Image, Network: string(network), Isolation: string(info.Isolation), Volumes: vols, Limits: info.Limits, Enforcement: info.Enforcement}, "")
		if info.Limits != "" && rep.level >= 2 {
			fmt.Fprintf(c.App.ErrWriter, "rungv: -m/--cpus enforced by: %s\n", info.Limits)
		}
	}
	code, err := runtime.Run(context.Background(), s, h)
	var notFound *runtime.ExecNotFoundError
	if errors.As(err, &notFound) {
		return execNotFound{notFound} // Docker's words and status
	}
	if err != nil {
		return cli.Exit("rungv run: "+err.Error(), 125)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
