// Package app is rungv's command line (urfave/cli/v2).
package app

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/cmd/rungv/internal/checkpointcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/gccmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/infocmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/poolcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/runcmd"
	"z.gfire.dev/gvx/cmd/rungv/internal/servecmd"
	"z.gfire.dev/gvx/internal/cliconv"
	"z.gfire.dev/gvx/internal/termsafe"
)

// Main runs the CLI with args and exits.
func Main(args []string) {
	a := &cli.App{
		Name:                      "rungv",
		Usage:                     "run an OCI image as one isolated gVisor episode",
		DisableSliceFlagSeparator: true,
		HideHelpCommand:           true,
		Commands:                  []*cli.Command{runcmd.Command, checkpointcmd.Command, poolcmd.Command, servecmd.Command, infocmd.Command, gccmd.Command},
		Description: `rungv runs each episode — one OCI image — in its own gVisor Sentry, as one
unprivileged process tree that leaves nothing behind: the rootfs is a
flattened EROFS image from the cache, /var/lib/docker can be an ext4lite
volume file (reset = a reflink clone of a golden one), the network is a
user-space NAT that reaches the outside world only, and the guest is
treated as hostile (docs/security.md). The binary is also gVisor's runsc.

Examples:
   rungv run oci:./busybox-layout echo hi
   rungv run -p unix:/srv/ep/ep-1.sock:2375 \
       --mount type=volume,src=/srv/ep/ep-1.ext4,dst=/var/lib/docker \
       -e DOCKER_TLS_CERTDIR= oci:./dind --tls=false
   rungv pool --golden golden.ext4 --scratch /srv/ep -n 8 -j 4 oci:./dind ...
   rungv info --dir /srv/ep      # what this host allows (isolation, cgroup, reflink)
   rungv gc --dry-run            # what dead episodes left (state, sockets, cgroups)

Exit status: the guest's; 125 when rungv itself fails; 2 for a usage error.`,
	}
	cliconv.Apply(a, "gvisor.dev/gvisor")
	if err := a.Run(args); err != nil {
		fmt.Fprintln(os.Stderr, "rungv:", termsafe.Message(err.Error()))
		os.Exit(125)
	}
}
