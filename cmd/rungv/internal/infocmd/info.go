// Package infocmd is rungv's info verb: what this host allows rungv and
// what rungv will use on it.
package infocmd

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/runtime"
)

// Command is `rungv info`.
var Command = &cli.Command{
	Name:  "info",
	Usage: "say what this host allows and what rungv will use: isolation, platform, cgroup, NAT, cache, reflink",
	Description: `Probes the host as rungv run would, without starting an episode: whether
user namespaces and a fresh /proc can be made (else --isolation auto runs
seccomp-only: an unprivileged container or pod, or inside gVisor), how
gVisor's systrap will wait (seccomp user notification, or the futex loop
where a listener is refused), Yama's ptrace scope, Landlock, which host
cgroup would enforce -m/--cpus/--pids-limit, whether the NAT can start and
where its DNS goes, whether the image cache is usable (writable, not
noexec), with --dir whether volumes there reset by O(1) reflink, and which
patches of gvx's gVisor series this binary was built with (and what it
lacks without the others: docs/gvisor-patches.md), and whether it can run
episodes inside a gVisor sandbox (nested mode: patch 0004-nested-fault-access;
docs/kubernetes.md, "Inside gVisor").

Examples:
   rungv info
   rungv info --dir /srv/rl-episodes --json | jq .isolation.mode`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "dir", Usage: "also try reflink clones in `DIR` (where golden and episode volumes live)"},
		&cli.StringFlag{Name: "cache-dir", EnvVars: []string{"GVX_CACHE_DIR", "GVX_CACHE"}, Usage: "the image cache to check (default: as rungv run)"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 0 {
			return cli.Exit("rungv info: takes no arguments (try --dir DIR)", 2)
		}
		dir := c.String("dir")
		if dir != "" {
			var err error
			if dir, err = filepath.Abs(dir); err != nil {
				return cli.Exit("rungv info: "+err.Error(), 125)
			}
		}
		h := runtime.Info(dir, c.String("cache-dir"))
		w := c.App.Writer
		if c.Bool("json") {
			b, _ := json.MarshalIndent(h, "", "  ")
			fmt.Fprintf(w, "%s\n", b)
			return nil
		}
		yes := func(b bool, why string) string {
			if b {
				return "yes"
			}
			return "no: " + why
		}
		fmt.Fprintf(w, "isolation:        %s (%s)\n", h.Isolation.Mode, h.Isolation.Why)
		fmt.Fprintf(w, "  user namespaces: %s\n", yes(h.Isolation.UserNamespaces, h.Isolation.UserNamespacesErr))
		fmt.Fprintf(w, "  fresh /proc:     %s\n", yes(h.Isolation.ProcMountable, h.Isolation.ProcErr))
		fmt.Fprintf(w, "  inside gVisor:   %v\n", h.Isolation.InGVisor)
		fmt.Fprintf(w, "nested mode:      %s (%s)\n", map[bool]string{true: "available", false: "unavailable"}[h.Nested.Available], h.Nested.Why)
		fmt.Fprintf(w, "platform:         %s, stubs wait by %s\n", h.Platform, h.SystrapMode)
		if h.PlatformNote != "" {
			fmt.Fprintf(w, "  warning:         %s\n", h.PlatformNote)
		}
		for _, p := range h.GVisorPatches {
			if p.Applied {
				fmt.Fprintf(w, "gvisor patch:     %s: applied (%s)\n", p.Name, p.Enables)
			} else {
				fmt.Fprintf(w, "gvisor patch:     %s: MISSING: %s (build with scripts/build.sh: docs/gvisor-patches.md)\n", p.Name, p.Lacks)
			}
		}
		fmt.Fprintf(w, "landlock:         ABI %d\n", h.Landlock)
		fmt.Fprintf(w, "host cgroup:      %s\n", h.Cgroup)
		fmt.Fprintf(w, "nat:              %s", h.NAT)
		if h.DNS != "" {
			fmt.Fprintf(w, ", DNS to %s", h.DNS)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "image cache:      %s: %s\n", h.Cache, h.CacheOK)
		if h.Dir != "" {
			fmt.Fprintf(w, "reflink in %s: %s\n", h.Dir, h.Reflink)
		}
		fmt.Fprintf(w, "user:             uid %d gid %d\n", h.UID, h.GID)
		if h.Leftovers > 0 {
			fmt.Fprintf(w, "left by dead episodes: %d (state directories, sockets, cgroups): see rungv gc --dry-run\n", h.Leftovers)
		}
		return nil
	},
}
