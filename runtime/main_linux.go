package runtime

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gvisor.dev/gvisor/runsc/cli/maincli"

	episodenet "z.gfire.dev/gvx/runtime/net"
	"z.gfire.dev/gvx/runtime/volume"
)

// Main dispatches a rungv process. The binary is three programs in one:
// the CLI (ours is called for "run", "pool", "help", "version" and no arguments),
// the episode supervisor (a hidden subcommand), and gVisor's runsc for
// everything else — runsc re-executes the binary as its sandbox ("boot")
// and gofer with its global flags first. Main never returns for the latter
// two.
func Main(ours func()) {
	if len(os.Args) > 1 && os.Args[1] == episodenet.RelayCmd { // inside the guest
		os.Exit(episodenet.RelayInit(os.Args[2:]))
	}
	if builtWithCgo && (len(os.Args) > 1 && (os.Args[1] == superviseCmd || os.Args[1] == initCmd) || isRunsc(os.Args[1:])) {
		fmt.Fprintln(os.Stderr, errCgo)
		os.Exit(125)
	}
	if len(os.Args) > 1 && (os.Args[1] == superviseCmd || os.Args[1] == initCmd) {
		closeInheritedOnExec()
	}
	if len(os.Args) > 1 && os.Args[1] == superviseCmd {
		os.Exit(supervise())
	}
	if len(os.Args) > 1 && os.Args[1] == initCmd {
		os.Exit(episodeInit())
	}
	if isRunsc(os.Args[1:]) {
		os.Args = append(os.Args[:1:1], patchBootArgs(os.Args[1:])...)
		fitNestedIfBoot(os.Args[1:])
		dropBootCaps(os.Args[1:])
		confineBoot(os.Args[1:])
		holdBootGC(os.Args[1:])
		remapBootStdio(os.Args[1:])
		volume.Register()
		if episodenet.IsSandboxNetRun(os.Args[1:]) {
			episodenet.RunSandboxNet() // --network nat: see runtime/net/nat_run_linux.go
		}
		maincli.Main()
		os.Exit(0)
	}
	ours()
}

// errCgo is why a cgo build cannot run episodes (--help and --version
// still work).
var errCgo = errors.New("rungv: this binary was built with cgo; gVisor's sandbox cannot start from it. Rebuild with CGO_ENABLED=0")

// isRunsc tells runsc invocations from CLI ones. runsc's are a runsc
// subcommand, or global flags (always --name=value) followed by one (how
// rungv's init and runsc itself re-execute the binary: "--root=… run …").
// Everything else is rungv's CLI, so that a mistyped verb gets rungv's
// usage error, not runsc's.
func isRunsc(args []string) bool {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i == len(args) {
		return false // flags only: rungv --help, --version, a usage error
	}
	return runscVerbs[args[i]] || i > 0 && sharedVerbs[args[i]]
}

// sharedVerbs are rungv's verbs that are runsc's too: rungv's own unless global
// flags come first (as runsc re-executes itself).
var sharedVerbs = map[string]bool{"run": true, "checkpoint": true}

// runscVerbs are runsc's subcommands (`rungv --root=/x help` lists them),
// except sharedVerbs.
var runscVerbs = map[string]bool{}

func init() {
	for _, v := range strings.Fields(`boot gofer umount bwrap create delete do events exec
		flags fscheckpoint kill list pause port-forward ps read restore resume sandboxexec spec
		start state tar update wait debug profile read-control statefile symbolize usage
		write-control cpu-features features install mitigate nvproxy trace uninstall
		export-metrics metric-metadata metric-server`) {
		runscVerbs[v] = true
	}
}
