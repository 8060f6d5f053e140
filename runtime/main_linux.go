package runtime

import (
	"fmt"
	"os"

	"gvisor.dev/gvisor/runsc/cli/maincli"

	"z.gfire.dev/gvx/runtime/volume"
)

// Main dispatches a rungv process. The binary is three programs in one:
// the CLI (ours is called for "run", "pool", "help", "version" and no arguments),
// the episode supervisor (a hidden subcommand), and gVisor's runsc for
// everything else — runsc re-executes the binary as its sandbox ("boot")
// and gofer with its global flags first. Main never returns for the latter
// two.
func Main(ours func()) {
	if len(os.Args) > 1 && os.Args[1] == relayCmd { // inside the guest
		os.Exit(relayInit(os.Args[2:]))
	}
	if builtWithCgo {
		fmt.Fprintln(os.Stderr, "rungv: this binary was built with cgo; gVisor's sandbox cannot start from it. Rebuild with CGO_ENABLED=0.")
		os.Exit(125)
	}
	if len(os.Args) > 1 && (os.Args[1] == superviseCmd || os.Args[1] == initCmd) {
		closeInheritedOnExec()
	}
	if len(os.Args) > 2 && os.Args[1] == superviseCmd {
		os.Exit(supervise(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) > 1 && os.Args[1] == initCmd {
		os.Exit(episodeInit(os.Args[2:]))
	}
	if isRunsc(os.Args[1:]) {
		os.Args = append(os.Args[:1:1], patchBootArgs(os.Args[1:])...)
		volume.Register()
		if isSandboxNetRun(os.Args[1:]) {
			runSandboxNet() // --network nat: see nat_run_linux.go
		}
		maincli.Main()
		os.Exit(0)
	}
	ours()
}

// isRunsc tells runsc invocations from CLI ones.
func isRunsc(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "run", "pool", "help", "h", "version", "-h", "--help", "-v", "--version":
		return false
	}
	return true
}
