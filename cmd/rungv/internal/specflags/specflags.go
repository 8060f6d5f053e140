// Package specflags holds the episode flags rungv run and rungv pool share
// — one definition of their names, defaults and parsing — and builds the
// episode spec (package spec) from them, or reads a whole one with --spec.
package specflags

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/internal/cliconv"
	"z.gfire.dev/gvx/internal/units"
	"z.gfire.dev/gvx/spec"
)

// Defaults the flags show; an unset flag leaves the spec's zero value,
// which means the same.
const (
	defaultPids      = 4096
	defaultNATRelays = 256
)

// SpecFile is the flag that reads a whole spec from a file.
const SpecFile = "spec"

// Flags returns the episode flags, but for those named in omit.
func Flags(omit ...string) []cli.Flag {
	all := []cli.Flag{
		&cli.StringFlag{Name: SpecFile, Usage: "read the whole episode from this JSON spec `FILE` (docs/runtime.md, \"The episode spec\"); no other episode flag, IMAGE or COMMAND may be given with it"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set an environment variable (`KV`: KEY=VALUE; KEY alone copies the host's)"},
		&cli.StringFlag{Name: "entrypoint", Usage: "replace the image's entrypoint (\"\" clears it)"},
		&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory in the guest (an absolute path)"},
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "`user[:group]`, names or numbers"},
		&cli.StringFlag{Name: "pull", Value: string(spec.PullMissing), Usage: "when to fetch a registry image: missing (use the cache's copy or local tag if there is one), always, never (no network)"},
		&cli.StringFlag{Name: "network", Value: string(spec.NetworkNAT), Usage: "guest network: nat (10.0.2.15/24, outbound through the host, to the outside world only) or none (loopback only)"},
		&cli.StringSliceFlag{Name: "egress", Usage: "NAT egress `RULE`: allow=CIDR[:PORTS] or deny=CIDR[:PORTS] (repeatable; deny rules win; see rungv run --help)"},
		&cli.IntSliceFlag{Name: "allow-host-port", Usage: "let the guest reach the host's 127.0.0.1:`PORT` (TCP and UDP) as 10.0.2.2:PORT (repeatable)"},
		&cli.IntFlag{Name: "nat-max-relays", Value: defaultNATRelays, Usage: "most TCP connections and UDP flows the guest holds at once through the NAT"},
		&cli.StringSliceFlag{Name: "mount", Usage: "mount `SPEC`: type=bind|tmpfs|volume,src=…,dst=…, then any of ,readonly ,size=32G ,max-open=N ,allow-foreign ,durability=episode (a guest fsync skips the host flush: survives a killed sandbox, not a host crash; a missing volume file is created; CSV: quote a field holding a comma, \"src=/a,b\")"},
		&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "publish a guest TCP port on the host (`SPEC`): unix:HOSTSOCK:GUESTPORT or [IP:]HOSTPORT:GUESTPORT (IP 127.0.0.1 by default)"},
		&cli.StringFlag{Name: "memory", Aliases: []string{"m"}, Usage: "memory the guest sees and may use (e.g. 4g)"},
		&cli.Float64Flag{Name: "cpus", Usage: "CPUs the guest sees (e.g. 1.5)"},
		&cli.IntFlag{Name: "pids-limit", Value: defaultPids, Usage: "host tasks (processes and threads) the whole episode may have; -1: no limit"},
		&cli.StringFlag{Name: "limits", Value: string(spec.LimitsStrict), Usage: "strict: refuse -m/--cpus that no host cgroup would enforce (not root, no delegated cgroup v2); best-effort: start anyway, bounded by the Sentry only"},
		&cli.BoolFlag{Name: "privileged", Value: true, Usage: "give the guest every capability and /sys/fs/cgroup, for docker:dind (capabilities of gVisor's Sentry, not the host's); --privileged=false gives docker's default set"},
		&cli.BoolFlag{Name: "net-raw", Usage: "allow raw sockets"},
		&cli.BoolFlag{Name: "allow-packet-socket-write", Usage: "allow writes on AF_PACKET sockets"},
		&cli.BoolFlag{Name: "allow-suid", Usage: "honour set-user-ID and set-group-ID bits"},
		&cli.StringFlag{Name: "isolation", Value: string(spec.IsolationAuto), Usage: "host-side walls: auto (the strongest this host allows), namespaces (user, network and PID namespaces), seccomp-only (none: for unprivileged containers and pods)"},
		&cli.StringFlag{Name: "platform", Usage: "gVisor platform: systrap (default), ptrace, kvm"},
	}
	return slices.DeleteFunc(all, func(f cli.Flag) bool { return slices.Contains(omit, f.Names()[0]) })
}

// episodeFlags are the flags that describe the episode (all of Flags but
// --spec): refused beside --spec.
func episodeFlags() []string {
	var names []string
	for _, f := range Flags(SpecFile) {
		names = append(names, f.Names()[0])
	}
	return names
}

// UsageError is a usage error: a flag, an argument or a spec that is
// wrong, found before any episode starts. It exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitCode is cliconv.UsageExit.
func (e *UsageError) ExitCode() int { return cliconv.UsageExit }

// Usage is a usage error of verb.
func Usage(verb, format string, a ...any) error {
	return &UsageError{Msg: verb + ": " + fmt.Sprintf(format, a...)}
}

// Spec returns the episode c describes: read from --spec FILE when it is
// given (then no episode flag and no IMAGE or COMMAND may be), else built
// from the flags and IMAGE [COMMAND [ARG...]]. The spec is valid; an
// error is a usage error of verb ("rungv run") naming the flag.
func Spec(c *cli.Context, verb string) (*spec.Spec, error) {
	if file := c.String(SpecFile); file != "" {
		return FromFile(c, verb, file)
	}
	if c.NArg() < 1 {
		return nil, Usage(verb, "IMAGE is required (try: %s oci:DIR echo hi; or --spec FILE)", verb)
	}
	s, err := FromFlags(c)
	if err != nil {
		return nil, Usage(verb, "%v", err)
	}
	if err := s.Validate(); err != nil {
		return nil, Usage(verb, "%v", spec.Rename(err, FlagOf))
	}
	return s, nil
}

// FromFile reads the spec in file, refusing episode flags and arguments
// beside it: the file is the whole episode.
func FromFile(c *cli.Context, verb, file string) (*spec.Spec, error) {
	return Whole(c, verb, "--spec", "--spec "+file, func() (*spec.Spec, error) { return spec.ReadFile(file) })
}

// Whole reads a whole spec with read, from source ("--spec FILE",
// "--spec-fd 4"), refusing episode flags and arguments beside it. Errors
// of read are prefixed with flag.
func Whole(c *cli.Context, verb, flag, source string, read func() (*spec.Spec, error)) (*spec.Spec, error) {
	var beside []string
	for _, n := range episodeFlags() {
		if c.IsSet(n) {
			beside = append(beside, "--"+n)
		}
	}
	if c.NArg() > 0 {
		beside = append(beside, "IMAGE and COMMAND")
	}
	if len(beside) > 0 {
		return nil, Usage(verb, "%s cannot be given with %s: the spec is the whole episode (put them in the spec instead)", strings.Join(beside, ", "), source)
	}
	s, err := read()
	if err != nil {
		return nil, Usage(verb, "%s: %v", flag, err)
	}
	return s, nil
}

// FromFlags builds the spec from c's flags and arguments, without
// validating it (Spec does). Relative host paths are made absolute.
func FromFlags(c *cli.Context) (*spec.Spec, error) {
	s := spec.New(c.Args().First())
	if tail := c.Args().Tail(); len(tail) > 0 {
		s.Args = tail
	}
	s.Workdir = c.String("workdir")
	s.User = c.String("user")
	s.Network = spec.NetworkMode(c.String("network"))
	s.Limits.CPUs = c.Float64("cpus")
	s.Privileged = c.Bool("privileged")
	s.NetRaw = c.Bool("net-raw")
	s.AllowPacketSocketWrite = c.Bool("allow-packet-socket-write")
	s.AllowSUID = c.Bool("allow-suid")
	s.Platform = spec.Platform(c.String("platform"))
	// Flags whose default is the spec's zero value are read only when
	// given, so an unset flag and the SDK's zero value make the same spec.
	if c.IsSet("pull") {
		s.Pull = spec.PullPolicy(c.String("pull"))
	}
	if c.IsSet("isolation") {
		s.Isolation = spec.Isolation(c.String("isolation"))
	}
	if c.IsSet("limits") {
		s.Limits.Policy = spec.LimitsPolicy(c.String("limits"))
	}
	if c.IsSet("pids-limit") {
		if s.Limits.Pids = c.Int("pids-limit"); s.Limits.Pids == 0 {
			return nil, fmt.Errorf("--pids-limit 0: give a positive limit, or -1 for none (default %d)", defaultPids)
		}
	}
	if c.IsSet("nat-max-relays") {
		if s.NATMaxRelays = c.Int("nat-max-relays"); s.NATMaxRelays < 1 {
			return nil, fmt.Errorf("--nat-max-relays %d: want 1 or more (default %d)", s.NATMaxRelays, defaultNATRelays)
		}
	}
	if c.IsSet("entrypoint") {
		s.Entrypoint = []string{}
		if e := c.String("entrypoint"); e != "" {
			s.Entrypoint = []string{e}
		}
	}
	for _, kv := range c.StringSlice("env") {
		if strings.Contains(kv, "=") {
			s.Env = append(s.Env, kv)
		} else if v, ok := os.LookupEnv(kv); ok {
			s.Env = append(s.Env, kv+"="+v)
		}
	}
	for _, arg := range c.StringSlice("mount") {
		m, err := spec.ParseMount(arg)
		if err != nil {
			return nil, err
		}
		s.Mounts = append(s.Mounts, m)
	}
	for _, arg := range c.StringSlice("publish") {
		p, err := spec.ParsePublish(arg)
		if err != nil {
			return nil, err
		}
		s.Ports = append(s.Ports, p)
	}
	if err := s.AbsPaths(); err != nil {
		return nil, spec.Rename(err, FlagOf)
	}
	s.Egress = c.StringSlice("egress")
	s.AllowHostPorts = c.IntSlice("allow-host-port")
	if m := c.String("memory"); m != "" {
		n, err := units.ParseSize(m)
		if err == nil && n <= 0 {
			err = fmt.Errorf("want a positive size like 512m or 4g")
		}
		if err != nil {
			return nil, fmt.Errorf("--memory %q: %v", m, err)
		}
		s.Limits.MemoryBytes = n
	}
	return s, nil
}

// flagOf names the flag behind each field of the spec (a field's first
// path element, or the whole path for limits).
var flagOf = map[string]string{
	"image": "IMAGE", "args": "COMMAND", "pull": "--pull", "entrypoint": "--entrypoint", "env": "--env",
	"user": "--user", "workdir": "--workdir", "mounts": "--mount", "ports": "--publish",
	"network": "--network", "egress": "--egress", "allow_host_ports": "--allow-host-port",
	"nat_max_relays": "--nat-max-relays", "limits.memory_bytes": "--memory", "limits.cpus": "--cpus",
	"limits.pids": "--pids-limit", "limits.policy": "--limits", "platform": "--platform",
	"isolation": "--isolation",
}

// FlagOf names the flag a spec field comes from: "--mount (mounts[0].target)"
// for "mounts[0].target", "--cpus" for "limits.cpus".
func FlagOf(field string) string {
	if f, ok := flagOf[field]; ok {
		return f
	}
	head := field
	if i := strings.IndexAny(field, ".["); i >= 0 {
		head = field[:i]
	}
	if f, ok := flagOf[head]; ok {
		return f + " (" + field + ")"
	}
	return field
}
