// Package runcmd is rungv's run verb.
package runcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/runtime"
)

// Command is `rungv run`.
var Command = &cli.Command{
	Name:      "run",
	Usage:     "run a command in a new episode of IMAGE (oci:DIR[:REF], docker-archive:TAR, or a registry reference)",
	ArgsUsage: "IMAGE [COMMAND] [ARG...]",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "rm", Usage: "remove the episode when it exits (always done; accepted for docker compatibility)"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set an environment variable (`KEY=VALUE`; KEY alone copies the host's)"},
		&cli.StringFlag{Name: "entrypoint", Usage: "replace the image's entrypoint (\"\" clears it)"},
		&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory in the guest"},
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "`user[:group]`, names or numbers"},
		&cli.StringFlag{Name: "network", Value: "none", Usage: "guest network: none"},
		&cli.StringSliceFlag{Name: "mount", Usage: "`type=bind|tmpfs|volume,src=…,dst=…[,readonly]`"},
		&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "publish a guest TCP port as a host unix socket: `unix:HOSTSOCK:GUESTPORT`"},
		&cli.StringFlag{Name: "memory", Aliases: []string{"m"}, Usage: "memory the guest sees (e.g. 4g)"},
		&cli.Float64Flag{Name: "cpus", Usage: "CPUs the guest sees"},
		&cli.BoolFlag{Name: "privileged", Value: true, Usage: "give the guest every capability and /sys/fs/cgroup, for docker:dind (capabilities of gVisor's Sentry, not the host's); --privileged=false gives docker's default set"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "keep stdin attached (always done; accepted for docker compatibility)"},
		&cli.BoolFlag{Name: "net-raw", Usage: "allow raw sockets"},
		&cli.BoolFlag{Name: "allow-packet-socket-write", Usage: "allow writes on AF_PACKET sockets"},
		&cli.BoolFlag{Name: "allow-suid", Usage: "honour set-user-ID and set-group-ID bits"},
		&cli.StringFlag{Name: "platform", Usage: "gVisor platform: systrap (default), ptrace, kvm"},
		&cli.IntFlag{Name: "error-fd", Value: -1, Hidden: true, Usage: "also write rungv's own error (not the guest's) to this fd"},
		&cli.StringFlag{Name: "cache-dir", EnvVars: []string{"GVX_CACHE_DIR", "GVX_CACHE"}, Usage: "the image cache (default: $GVX_CACHE, /var/cache/gvx as root, else the user cache dir)"},
		&cli.StringFlag{Name: "debug-log", EnvVars: []string{"RUNGV_DEBUG_LOG"}, Usage: "write runsc debug logs into this directory"},
	},
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

func runEpisode(c *cli.Context) error {
	if c.NArg() < 1 {
		return cli.Exit("rungv run: IMAGE is required (try: rungv run oci:DIR echo hi)", 125)
	}
	o := runtime.Options{
		Image:                  c.Args().First(),
		Args:                   c.Args().Tail(),
		Workdir:                c.String("workdir"),
		User:                   c.String("user"),
		Network:                runtime.NetworkMode(c.String("network")),
		CPUs:                   c.Float64("cpus"),
		NetRaw:                 c.Bool("net-raw"),
		AllowPacketSocketWrite: c.Bool("allow-packet-socket-write"),
		AllowSUID:              c.Bool("allow-suid"),
		DebugLogDir:            c.String("debug-log"),
		Platform:               c.String("platform"),
		Privileged:             c.Bool("privileged"),
		Lockdown:               true,
	}
	if c.IsSet("entrypoint") {
		o.EntrypointSet = true
		if e := c.String("entrypoint"); e != "" {
			o.Entrypoint = []string{e}
		}
	}
	for _, kv := range c.StringSlice("env") {
		if strings.Contains(kv, "=") {
			o.Env = append(o.Env, kv)
		} else if v, ok := os.LookupEnv(kv); ok {
			o.Env = append(o.Env, kv+"="+v)
		}
	}
	for _, s := range c.StringSlice("mount") {
		m, err := runtime.ParseMount(s)
		if err != nil {
			return cli.Exit(err.Error(), 125)
		}
		if m.Source != "" {
			if m.Source, err = filepath.Abs(m.Source); err != nil {
				return cli.Exit(err.Error(), 125)
			}
		}
		o.Mounts = append(o.Mounts, m)
	}
	for _, s := range c.StringSlice("publish") {
		p, err := runtime.ParsePublish(s)
		if err != nil {
			return cli.Exit(err.Error(), 125)
		}
		o.Ports = append(o.Ports, p)
	}
	if s := c.String("memory"); s != "" {
		n, err := parseSize(s)
		if err != nil {
			return cli.Exit(fmt.Sprintf("rungv run: --memory %q: %v", s, err), 125)
		}
		o.MemoryBytes = n
	}
	o.CacheDir = c.String("cache-dir")
	code, err := runtime.Run(context.Background(), o)
	if err != nil {
		return cli.Exit("rungv run: "+err.Error(), 125)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// parseSize parses docker's memory sizes: a number with an optional
// b, k, m, g or t suffix (powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a positive size like 512m or 4g")
	}
	return n * mult, nil
}
