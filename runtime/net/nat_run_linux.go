package episodenet

import (
	"context"
	"fmt"
	"os"

	"github.com/google/subcommands"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/runsc/cli"
	"gvisor.dev/gvisor/runsc/cmd/sandboxsetup"
	"gvisor.dev/gvisor/runsc/cmd/util"
	"gvisor.dev/gvisor/runsc/config"
	"gvisor.dev/gvisor/runsc/container"
	"gvisor.dev/gvisor/runsc/flag"
	"gvisor.dev/gvisor/runsc/specutils"
)

// runsc's run subcommand refuses --rootless with --network=sandbox ("sandbox
// network isn't supported with --rootless"): a rootless caller usually
// cannot set up the network namespace. rungv's can — the supervisor is
// root in the user namespace that owns it, made eth0 there, and runsc's
// parent process (the episode's init, in that namespace) opens the packet
// socket on it. Episodes with volumes need --rootless (see
// volumeRunscFlags), so a NAT episode's "run" is served by sandboxNetRun,
// which calls runsc's container package directly; runsc does everything
// else (flags, config, logs, the sandbox and gofer it re-executes).

// IsSandboxNetRun tells a runsc "run" with --network=sandbox among runsc
// arguments (global flags, then the subcommand).
func IsSandboxNetRun(args []string) bool {
	sandboxNet := false
	for _, a := range args {
		switch {
		case a == "--network=sandbox":
			sandboxNet = true
		case a == "run":
			return sandboxNet
		case len(a) == 0 || a[0] != '-':
			return false // another subcommand
		}
	}
	return false
}

// RunSandboxNet runs os.Args (runsc flags, "run", its flags, the ID)
// with sandboxNetRun standing in for runsc's run. It does not return.
func RunSandboxNet() {
	cli.Run(nil, map[util.SubCommand]string{new(sandboxNetRun): ""}, nil)
	os.Exit(128) // not reached: cli.Run exits
}

// sandboxNetRun is "run [--detach] [--pid-file=F] --bundle=B ID" with what
// rungv's init passes, nothing else.
type sandboxNetRun struct {
	bundle  string
	pidFile string
	detach  bool
	passFDs sandboxsetup.FDMappings
}

func (*sandboxNetRun) Name() string { return "run" }
func (*sandboxNetRun) Synopsis() string {
	return "run a container whose sandbox owns the namespace's interfaces"
}
func (*sandboxNetRun) Usage() string {
	return "run [--detach] [--pid-file=F] [--pass-fd=M:N]... --bundle=B <container id>\n"
}

func (r *sandboxNetRun) SetFlags(f *flag.FlagSet) {
	f.StringVar(&r.bundle, "bundle", "", "path to the bundle directory")
	f.StringVar(&r.pidFile, "pid-file", "", "file to write the sandbox's PID to")
	f.BoolVar(&r.detach, "detach", false, "return once the container runs")
	f.Var(&r.passFDs, "pass-fd", "file descriptor passed to the container in M:N format (the published ports')")
}

// FetchSpec implements util.SubCommand.
func (r *sandboxNetRun) FetchSpec(conf *config.Config, f *flag.FlagSet) (string, *specs.Spec, error) {
	if f.NArg() != 1 || r.bundle == "" {
		return "", nil, fmt.Errorf("want --bundle=B and one container id")
	}
	spec, err := specutils.ReadSpec(r.bundle, conf)
	if err != nil {
		return "", nil, err
	}
	return f.Arg(0), spec, nil
}

func (r *sandboxNetRun) Execute(_ context.Context, f *flag.FlagSet, args ...any) subcommands.ExitStatus {
	conf := args[0].(*config.Config)
	ws := args[1].(*unix.WaitStatus)
	id, spec, err := r.FetchSpec(conf, f)
	if err != nil {
		return util.Errorf("run: %v", err)
	}
	pass := map[int]*os.File{}
	for _, m := range r.passFDs {
		pass[m.Guest] = os.NewFile(uintptr(m.Host), "pass-fd")
	}
	st, err := container.Run(conf, container.Args{
		ID:        id,
		Spec:      spec,
		BundleDir: r.bundle,
		PIDFile:   r.pidFile,
		Attached:  !r.detach,
		PassFiles: pass,
	})
	for _, f := range pass {
		f.Close()
	}
	if err != nil {
		return util.Errorf("running container: %v", err)
	}
	*ws = st
	return subcommands.ExitSuccess
}
