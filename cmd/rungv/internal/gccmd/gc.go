// Package gccmd is rungv's gc verb: remove what dead episodes left.
package gccmd

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/runtime"
)

// Command is `rungv gc`.
var Command = &cli.Command{
	Name:  "gc",
	Usage: "list and remove what dead episodes of this user left: state directories, published sockets, host cgroups",
	Description: `Every episode records, in its state directory ($TMPDIR/rungv-ID, locked
while the episode lives), the host resources it makes before it makes them:
its published unix sockets and its host cgroups (gvx-ID under each cgroup
mount). Every rungv run sweeps the state directories of dead episodes;
rungv gc does the same on demand, and also removes orphaned cgroups: empty
gvx-* directories under the cgroup mounts that no record names (a kill
before the record existed, an older rungv), which this user may remove
(root: any), with no process, no child cgroup, older than a minute, and not
of a live episode here. A recorded cgroup is removed only if it is named
gvx-<the episode's ID> on a cgroup filesystem: a record cannot make rungv
remove anything else. What cannot be removed yet (a cgroup whose dying tasks
are still going) is reported with the reason and stays for the next gc.

Exit status: 0, or 1 when something could not be removed.

Examples:
   rungv gc --dry-run          # what would go
   rungv gc --json | jq .      # remove, report as JSON`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list only; remove nothing"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object: {\"dry_run\":…, \"entries\":[{kind, path, episode, removed, error}]}"},
		&cli.BoolFlag{Name: "no-orphans", Usage: "only what dead episodes' records name (what every rungv run does)"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 0 {
			return cli.Exit("rungv gc: takes no arguments (the state directories are in $TMPDIR: "+os.TempDir()+")", 2)
		}
		dry := c.Bool("dry-run")
		entries := runtime.GC(runtime.GCOptions{DryRun: dry, Orphans: !c.Bool("no-orphans")})
		failed := 0
		for _, e := range entries {
			if e.Error != "" {
				failed++
			}
		}
		w := c.App.Writer
		if c.Bool("json") {
			if entries == nil {
				entries = []runtime.GCEntry{}
			}
			b, _ := json.Marshal(struct {
				DryRun  bool              `json:"dry_run"`
				Entries []runtime.GCEntry `json:"entries"`
			}{dry, entries})
			fmt.Fprintf(w, "%s\n", b)
		} else {
			for _, e := range entries {
				status := "removed"
				switch {
				case e.Error != "":
					status = "left: " + e.Error
				case dry:
					status = "would remove"
				}
				fmt.Fprintf(w, "%-13s %s: %s\n", e.Kind, e.Path, status)
			}
			if len(entries) == 0 {
				fmt.Fprintln(w, "nothing to remove")
			}
		}
		if failed > 0 {
			return cli.Exit("", 1)
		}
		return nil
	},
}
