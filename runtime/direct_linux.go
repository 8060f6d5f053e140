package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/control/client"
	"gvisor.dev/gvisor/pkg/control/server"
	"gvisor.dev/gvisor/pkg/lisafs"
	"gvisor.dev/gvisor/pkg/unet"
	"gvisor.dev/gvisor/pkg/urpc"
	"gvisor.dev/gvisor/runsc/boot"
	"gvisor.dev/gvisor/runsc/specutils"

	"z.gfire.dev/gvx/runtime/volume"
)

// IsolationSeccompOnly: the sandbox started directly, with no namespace.
//
// runsc's own create path always puts its sandbox and gofer into new
// mount, IPC, UTS, PID and network namespaces (and, unprivileged, a user
// namespace): none of that can be made in an unprivileged container or
// pod, or inside gVisor. So rungv starts runsc's sandbox process ("boot")
// itself, as a child of this process, and gives it what runsc's create
// would have given it, all as descriptors:
//
//	rungv run                 host side: serves volumes (ext4lite over
//	│                         lisafs, in this process), NAT, published
//	│                         ports; waits; locked down (profile "direct")
//	└─ rungv boot             gVisor's Sentry: its own seccomp filters,
//	   └─ systrap stubs       no_new_privs, no capability (dropBootCaps,
//	                          as root too); Landlock; --attached
//
//   - rootfs and the relay image: EROFS files opened here (--io-fds), as
//     runsc's goferless mode does;
//   - volumes: one socket pair per volume, whose other end this process
//     serves with package volume (the file it opened and locked, never the
//     path again); there is no gofer process;
//   - network: loopback only, or for NAT an fd-based link on a SEQPACKET
//     socket pair whose other end is the host side's NAT netstack (no
//     veth, no packet socket, no namespace);
//   - published ports: their socket pairs (--pass-fd), as in every mode;
//   - its control server listens on a socket in the state directory
//     (mode 0700), over which this process configures the network, starts
//     the container and forwards signals.
//
// What is lost against IsolationNamespaces (docs/security.md): the Sentry
// runs as the caller's uid in the caller's namespaces, with no chroot, so
// only gVisor's seccomp filters (which allow no open of a path and no
// socket of the host's) and the Sentry's own code stand between a guest
// that broke the Sentry and the caller's files and network; and a host
// cgroup (root) or the container's own limits are what bound its tasks.
// Bind mounts of host directories need a gofer and are refused.

// runDirect runs the prepared episode ep with IsolationSeccompOnly.
func (ep *episode) runDirect(p *plan, pub *publisher, vols []*os.File, nat *natHost, lim *hostLimits, start func(pid int) error) (int, error) {
	o := &p.host
	globals, bundle, id, err := splitRunscArgs(ep.runscArgs)
	if err != nil {
		return 0, err
	}
	js, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return 0, err
	}
	var restore []*os.File          // the checkpoint's files (RestoreFrom)
	var restoreInfo *CheckpointInfo // and what it records
	defer func() {
		for _, f := range restore {
			f.Close()
		}
	}()
	if o.RestoreFrom != "" {
		if restore, js, restoreInfo, err = openCheckpoint(o.RestoreFrom); err != nil {
			return 0, err
		}
		if err := checkRestoreMatches(p, restoreInfo); err != nil {
			return 0, err
		}
		// The saved kernel's tasks carry the checkpointed container's ID,
		// and gVisor validates the spec against the saved one: boot the
		// checkpoint's own.
		id = restoreInfo.ContainerID
		if err := os.WriteFile(filepath.Join(bundle, "config.json"), js, 0o644); err != nil {
			return 0, err
		}
	}
	var spec *specs.Spec
	if err := json.Unmarshal(js, &spec); err != nil || spec == nil {
		if o.RestoreFrom != "" {
			return 0, fmt.Errorf("seccomp-only: --restore %s: its config.json is no OCI spec (%v): take the checkpoint again", o.RestoreFrom, err)
		}
		return 0, fmt.Errorf("seccomp-only: read the bundle's spec: %v", err)
	}
	var files fileList
	defer files.closeAll()

	specFile, err := os.Open(filepath.Join(bundle, "config.json"))
	if err != nil {
		return 0, err
	}
	args := append(append([]string{}, globals...), "--directfs=false", "--control-rpc-stop-timeout=0")
	// The sandbox's own stderr (runsc's fatal errors, Go's panics) goes to
	// a file in the state directory, for the error message; the guest's
	// stdio is moved off 0-2 first (remapBootStdio).
	panicLog, err := os.OpenFile(filepath.Join(ep.state, "panic.log"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	args = append(args, "--panic-log-fd="+files.add(panicLog))
	args = append(args, "boot", "--bundle="+bundle, "--attached",
		"--spec-fd="+files.add(specFile), "--stdio-fds=0,1,2")
	// The published ports' pairs come first, at numbers that do not
	// depend on anything a restore does differently (it passes no
	// --rootfs-upper-tar-fd, which a NAT episode's resolv.conf makes): the
	// guest's end of each is a host socket whose descriptor number gVisor
	// saves and uses again after a restore (transport.HostSender).
	passFDs := []int{} // recorded as [] when there are none (nil: an older checkpoint)
	for i, f := range pub.guestFiles() {
		fd := files.add(f)
		args = append(args, fmt.Sprintf("--pass-fd=%s:%d", fd, guestPassFD(i)))
		n, _ := strconv.Atoi(fd)
		passFDs = append(passFDs, n)
	}
	if err := checkRestorePassFDs(o, restoreInfo, passFDs); err != nil {
		return 0, err
	}

	// The mounts, in the order of runsc's gofer mount configurations:
	// the rootfs, then every spec mount that has one.
	srv := lisafs.NewServer()
	defer srv.Destroy()
	var ioFDs, confs []string
	// The rootfs annotations buildSpec wrote (boot.NewRootfsHint reads
	// the same, and logs as it does).
	if spec.Annotations[annRootfsType] != "erofs" || spec.Annotations[annRootfsSource] == "" {
		return 0, errors.New("seccomp-only: the rootfs must be an EROFS image")
	}
	upper := specutils.MemoryOverlay
	if spec.Root.Readonly || spec.Annotations[annRootfsOverlay] == "none" {
		upper = specutils.NoOverlay
	}
	rootfs, err := os.Open(spec.Annotations[annRootfsSource])
	if err != nil {
		return 0, fmt.Errorf("seccomp-only: the rootfs image: %w", err)
	}
	ioFDs = append(ioFDs, files.add(rootfs))
	confs = append(confs, specutils.GoferMountConf{Lower: specutils.Erofs, Upper: upper}.String())
	volSpecs, err := volume.SpecsOf(spec)
	if err != nil {
		return 0, err
	}
	volFiles := volumeFilesByTarget(p.spec.Mounts, vols)
	var conns []*lisafs.Connection
	var volConns []*volume.Conn
	var volTargets []string
	for _, m := range spec.Mounts {
		if !specutils.HasMountConfig(m) {
			continue
		}
		if specutils.IsErofsMount(m) {
			f, err := os.Open(m.Source)
			if err != nil {
				return 0, fmt.Errorf("seccomp-only: EROFS image %s: %w", m.Source, err)
			}
			ioFDs = append(ioFDs, files.add(f))
			confs = append(confs, specutils.GoferMountConf{Lower: specutils.Erofs, Upper: specutils.NoOverlay}.String())
			continue
		}
		v, ok := volSpecs[m.Destination]
		f := volFiles[m.Destination]
		if !ok || f == nil {
			return 0, fmt.Errorf("%w: --mount %s: a bind mount of a host directory needs runsc's gofer, which --isolation seccomp-only does not have: use a volume, or --isolation namespaces where the host allows user namespaces", ErrUnsupported, m.Destination)
		}
		impl, opts, err := volume.Serve(f, v, volume.DefaultSyncEvery)
		if err != nil {
			return 0, err
		}
		volConns = append(volConns, impl.(*volume.Conn))
		volTargets = append(volTargets, m.Destination)
		delete(volFiles, m.Destination) // the connection owns it now
		ours, theirs, err := unet.SocketPair(false)
		if err != nil {
			return 0, fmt.Errorf("seccomp-only: volume %s: %w", m.Destination, err)
		}
		conn, err := srv.CreateConnection(ours, m.Destination, opts, impl)
		if err != nil {
			ours.Close()
			theirs.Close()
			return 0, fmt.Errorf("seccomp-only: volume %s: %w", m.Destination, err)
		}
		conns = append(conns, conn)
		fd, _ := theirs.Release()
		ioFDs = append(ioFDs, files.add(os.NewFile(uintptr(fd), "volume "+m.Destination)))
		confs = append(confs, specutils.GoferMountConf{Lower: specutils.Lisafs, Upper: specutils.NoOverlay}.String())
	}
	args = append(args, "--io-fds="+strings.Join(ioFDs, ","), "--gofer-mount-confs="+strings.Join(confs, ","))
	if p := spec.Annotations[annRootfsUpperTar]; p != "" && restore == nil { // a restored rootfs is the checkpoint's
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		args = append(args, "--rootfs-upper-tar-fd="+files.add(f))
	}

	// The control server's socket, in the state directory (0700).
	ctlPath := filepath.Join(ep.state, "ctl")
	ctlFD, err := server.CreateSocket(ctlPath)
	if err != nil {
		return 0, fmt.Errorf("seccomp-only: the sandbox's control socket %s: %w", ctlPath, err)
	}
	// Listening now (the control server listens again when it starts),
	// so that the connection below waits in the backlog.
	if err := unix.Listen(ctlFD, 16); err != nil {
		unix.Close(ctlFD)
		return 0, fmt.Errorf("seccomp-only: the sandbox's control socket %s: %w", ctlPath, err)
	}
	args = append(args, "--controller-fd="+files.add(os.NewFile(uintptr(ctlFD), "control")))
	// Connected now, before this process locks down (no socket after
	// that); the sandbox's control server accepts it once it runs.
	ctl, err := client.ConnectTo(ctlPath)
	if err != nil {
		return 0, fmt.Errorf("seccomp-only: connect to the sandbox's control socket: %w", err)
	}
	defer func() { ctl.Close() }()
	// A restore replaces the control server's handlers and drops every
	// connection (gVisor's refreshHandlers): a socket made now, before
	// the lockdown, connects again afterwards (restoreSocket).
	redial := -1
	if restore != nil {
		if redial, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return 0, fmt.Errorf("seccomp-only: restore: %w", err)
		}
		defer func() {
			if redial >= 0 {
				unix.Close(redial)
			}
		}()
	}
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer syncR.Close()
	args = append(args, "--start-sync-fd="+files.add(syncW))
	env := append(bootEnv(), bootStdioEnv+"=1", bootLandlockEnv+"="+o.DebugLogDir)
	// A restore's Sentry runs without Go's collector until the restore
	// RPC returns (bootgc_linux.go).
	var gc *gcHold
	if restore != nil {
		gc = &gcHold{}
		defer gc.release()
		e, err := gc.holdGC(&files)
		if err != nil {
			return 0, err
		}
		env = append(env, e)
	}
	var natLink *os.File
	if nat != nil {
		natLink = nat.Child
	}
	var ck *checkpointer
	if o.CheckpointDir != "" {
		files, err := createCheckpoint(o.CheckpointDir, js, CheckpointInfo{ContainerID: id, Volumes: volTargets, Network: p.network, PassFDs: passFDs})
		if err != nil {
			return 0, err
		}
		ck = &checkpointer{id: id, ctl: ctl, files: files, vols: volConns, pub: pub, told: make(chan struct{})}
		defer func() {
			for _, f := range ck.files {
				f.Close()
			}
		}()
	}
	args = patchBootArgs(append(args, id))

	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = "runsc-sandbox"
	setStdio(cmd, o)
	cmd.ExtraFiles = files.files
	cmd.Env = env
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true, Pdeathsig: unix.SIGKILL}
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits:
		// this goroutine keeps its thread until the child is gone.
		goruntime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			done <- cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return 0, fmt.Errorf("seccomp-only: start the sandbox: %w", err)
	}
	files.closeAll() // the sandbox has them
	pub.closeGuestFiles()
	for _, c := range conns {
		srv.StartConnection(c)
	}
	fail := func(err error) (int, error) {
		_ = cmd.Process.Kill()
		<-done
		return 0, err
	}
	if err := start(cmd.Process.Pid); err != nil {
		return fail(err)
	}
	var b [1]byte
	if n, _ := syncR.Read(b[:]); n != 1 {
		err := <-done
		tail := bootLogTail(ep.state)
		return 0, fmt.Errorf("seccomp-only: the sandbox failed to boot (%v)%s%s", err, bootHint(tail), tail)
	}
	netArgs := directNetwork(natLink)
	if err := ctl.Call(boot.ContMgrSetNetworkArgs, netArgs, nil); err != nil {
		return fail(fmt.Errorf("seccomp-only: set up the guest's network: %w%s", err, bootLogTail(ep.state)))
	}
	if natLink != nil {
		natLink.Close() // the sandbox has it
		if err := nat.serveLink(); err != nil {
			return fail(err)
		}
	}
	if restore != nil {
		err := restoreSandbox(ctl, restore)
		gc.release()
		if err != nil {
			return fail(fmt.Errorf("seccomp-only: restore %s: %w%s", o.RestoreFrom, err, bootLogTail(ep.state)))
		}
		c, err := redialControl(redial, ctlPath)
		redial = -1
		if err != nil {
			return fail(fmt.Errorf("seccomp-only: restore %s: reconnect to the sandbox's control server: %w", o.RestoreFrom, err))
		}
		ctl.Close()
		ctl = c
		if ck != nil {
			ck.ctl = c
		}
		// The guest's own bridges (dockerd's docker0) were not saved.
		if err := pub.relayWord(relayLinksRestore, 0); err != nil {
			return fail(fmt.Errorf("seccomp-only: restore %s: tell the guest's relay: %w", o.RestoreFrom, err))
		}
	} else if err := ctl.Call(boot.ContMgrRootContainerStart, &id, nil); err != nil {
		return fail(fmt.Errorf("seccomp-only: start the guest: %w%s", err, bootLogTail(ep.state)))
	}
	if ck != nil && o.Control != nil {
		go ck.serve(o.Control)
	}
	code, err := waitChild(ep.ctx, ep.sigs, cmd, done, p.stopGrace(), func(s unix.Signal) {
		args := boot.SignalArgs{CID: id, Signo: int32(s), Mode: boot.DeliverToProcess}
		if ctl.Call(boot.ContMgrSignal, &args, nil) != nil && s == unix.SIGKILL {
			_ = cmd.Process.Kill()
		}
	})
	// The sandbox (with its stubs) was all the cgroup held: remove it now,
	// before the volumes' final sync, which may take a while after a
	// guest that wrote much; a SIGKILL from a caller that would not wait
	// (the SDK's Close after its bound) then leaves no cgroup.
	lim.cg.removeWhenEmpty()
	// The volumes' connections end with the sandbox's ends: each syncs
	// and closes its volume then.
	srv.Wait()
	if ck != nil {
		ck.awaitTold()
	}
	if ck != nil && ck.ended.Load() && err == nil {
		code = 0 // ended by its checkpoint (spec.ControlRequest)
	}
	return code, err
}

// checkRestorePassFDs refuses a restore (info: its checkpoint's record;
// nil for none) that would pass the published ports' pairs at other
// descriptor numbers (fds) than the checkpointed sandbox held them at: the
// restored guest's relay would use whatever sits there (gVisor's Sentry
// panics on a descriptor that is no socket). A checkpoint that recorded
// none (made before PassFDs) is not checked.
func checkRestorePassFDs(o *Host, info *CheckpointInfo, fds []int) error {
	if info == nil || info.PassFDs == nil || slices.Equal(info.PassFDs, fds) {
		return nil
	}
	if len(info.PassFDs) != len(fds) {
		return fmt.Errorf("%w: --restore %s: the checkpoint publishes %d ports, this restore %d: give it one -p per port of the checkpoint, in order (each with its own socket path or address)", ErrBadOption, o.RestoreFrom, len(info.PassFDs), len(fds))
	}
	return fmt.Errorf("%w: --restore %s: the checkpointed sandbox held its published ports at descriptors %v, this restore would pass them at %v: restore it with the rungv that made the checkpoint", ErrBadOption, o.RestoreFrom, info.PassFDs, fds)
}

// directNetwork is the guest's network as ContMgrSetNetworkArgs takes
// it: loopback, and with NAT eth0 on link, slirp's layout.
func directNetwork(link *os.File) *boot.CreateLinksAndRoutesArgs {
	args := &boot.CreateLinksAndRoutesArgs{LoopbackLinks: []boot.LoopbackLink{boot.DefaultLoopbackLink}}
	if link == nil {
		return args
	}
	subnet := net.IPNet{IP: natGuestIP.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
	args.FDBasedLinks = []boot.FDBasedLink{{
		Name:                 natGuestIf,
		MTU:                  natMTU,
		Addresses:            []boot.IPWithPrefix{{Address: natGuestIP, PrefixLen: 24}},
		Routes:               []boot.Route{{Destination: subnet}},
		LinkAddress:          natGuestMAC,
		Neighbors:            []boot.Neighbor{{IP: natGatewayIP, HardwareAddr: natHostMAC}, {IP: natDNSIP, HardwareAddr: natHostMAC}},
		NumChannels:          1,
		ProcessorsPerChannel: 1,
		IsPacket:             []bool{false},
		PreConfigured:        true,
	}}
	args.Defaultv4Gateway = boot.DefaultRoute{Name: natGuestIf, Route: boot.Route{
		Destination: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Gateway: natGatewayIP}}
	args.FilePayload = urpc.FilePayload{Files: []*os.File{link}}
	return args
}

// splitRunscArgs splits what prepare made ("GLOBALS... run --bundle=B
// ID") into its parts.
func splitRunscArgs(a []string) (globals []string, bundle, id string, err error) {
	if n := len(a); n >= 3 && a[n-3] == "run" {
		if b, ok := strings.CutPrefix(a[n-2], "--bundle="); ok {
			return a[:n-3], b, a[n-1], nil
		}
	}
	return nil, "", "", errors.New("rungv: internal: unexpected runsc arguments")
}

// volumeFilesByTarget maps each volume mount's guest path to the file
// openVolumes opened for it (in mount order).
func volumeFilesByTarget(ms []Mount, vols []*os.File) map[string]*os.File {
	out := map[string]*os.File{}
	i := 0
	for _, m := range ms {
		if m.Type == MountVolume && i < len(vols) {
			out[m.Target] = vols[i]
			i++
		}
	}
	return out
}

// bootEnv is the sandbox's environment: none of the caller's (runsc's
// create clears it too), only what the Go runtime may want.
func bootEnv() []string {
	var env []string
	for _, k := range []string{"GOTRACEBACK", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// bootLogTail is what the sandbox printed on its own stderr (runsc's
// fatal errors, Go's panics: --panic-log-fd), first lines, for an error
// message; "" if nothing.
func bootLogTail(state string) string {
	b, err := os.ReadFile(filepath.Join(state, "panic.log"))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 12 {
		lines = lines[:12]
	}
	return "; the sandbox says:\n  " + strings.Join(lines, "\n  ")
}

// bootHint says what to change for a sandbox that failed to boot for a
// reason of the host's, from its log.
func bootHint(log string) string {
	switch {
	case strings.Contains(log, "unable to attach") || strings.Contains(log, "PTRACE"):
		scope := "unknown"
		if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
			scope = strings.TrimSpace(string(b))
		}
		return ": gVisor's systrap platform could not ptrace its stub processes (Yama ptrace_scope is " + scope + "; 2 or 3 forbid it, as can a seccomp profile that blocks ptrace): set kernel.yama.ptrace_scope to 1 or 0, or allow ptrace in the container's seccomp profile"
	case strings.Contains(log, "failed to map stub"):
		return ": gVisor's systrap platform found no room for its stubs in this address space (inside another gVisor sandbox?)"
	}
	return ""
}

// fileList collects the descriptors handed to a child as ExtraFiles.
type fileList struct{ files []*os.File }

// add appends f and returns the descriptor number the child gets it as.
func (l *fileList) add(f *os.File) string {
	l.files = append(l.files, f)
	return strconv.Itoa(2 + len(l.files))
}

func (l *fileList) closeAll() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// waitChild waits for cmd (done gets cmd.Wait's result) while forwarding
// rungv's signals (sigs: those Run has caught since it began) with forward (in order, from a goroutine of its own: a
// Sentry that does not answer cannot hold up the stop). With grace >= 0,
// SIGTERM and SIGINT start it, after which SIGKILL is forwarded and, if
// cmd has not exited killWait later, cmd itself is killed; with grace 0
// cmd is killed at once (the guest is not told). With a negative grace
// the child sees to that (the supervisor's init does). Cancelling ctx
// kills cmd. It returns the child's shell-style exit code.
func waitChild(ctx context.Context, sigs <-chan os.Signal, cmd *exec.Cmd, done <-chan error, grace time.Duration, forward func(unix.Signal)) (int, error) {
	fwd := make(chan unix.Signal, 16)
	defer close(fwd)
	go func() {
		for s := range fwd {
			forward(s)
		}
	}()
	send := func(s unix.Signal) {
		select {
		case fwd <- s:
		default: // 16 pending: the Sentry is not answering; the timers below still run
		}
	}
	var stop, hard <-chan time.Time
	for {
		select {
		case s := <-sigs:
			stopping := (s == unix.SIGTERM || s == unix.SIGINT) && grace >= 0
			if stopping && grace == 0 {
				_ = cmd.Process.Kill()
				continue
			}
			send(s.(syscall.Signal))
			if stopping && stop == nil && hard == nil {
				stop = time.After(grace)
			}
		case <-stop:
			stop = nil
			send(unix.SIGKILL)
			hard = time.After(killWait)
		case <-hard:
			_ = cmd.Process.Kill()
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return exitCode(cmd.ProcessState), ctx.Err()
		case err := <-done:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return 0, err
			}
			return exitCode(cmd.ProcessState), nil
		}
	}
}

// killWait is how long a Sentry asked to kill its guest (the stop
// timeout's end) has before its process is killed.
const killWait = time.Second

// bootStdioEnv asks a seccomp-only sandbox process to move the guest's
// stdio off descriptors 0-2 (remapBootStdio).
const bootStdioEnv = "GVX_BOOT_STDIO"

// remapBootStdio, in a seccomp-only sandbox process, duplicates
// descriptors 0-2 (the guest's stdio, as rungv run's exec.Cmd set them up)
// and points --stdio-fds at the copies: runsc then replaces its own
// stderr with --panic-log-fd, and what the sandbox itself prints (a fatal
// error, a panic) goes to the state directory rather than to the guest's
// stderr. args are os.Args[1:]; it rewrites them in place.
func remapBootStdio(args []string) {
	if os.Getenv(bootStdioEnv) == "" || !isBoot(args) {
		return
	}
	os.Unsetenv(bootStdioEnv)
	for i, a := range args {
		if a != "--stdio-fds=0,1,2" {
			continue
		}
		var fds []string
		for fd := 0; fd < 3; fd++ {
			n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
			if err != nil {
				fmt.Fprintln(os.Stderr, "rungv: sandbox: stdio:", err)
				os.Exit(125)
			}
			fds = append(fds, strconv.Itoa(n))
		}
		args[i] = "--stdio-fds=" + strings.Join(fds, ",")
	}
}

// bootLandlockEnv carries, to a seccomp-only sandbox process, the
// directory its debug logs go to ("" without --debug-log); its presence
// asks the process to confine itself with Landlock before runsc's code
// runs (confineBoot).
const bootLandlockEnv = "GVX_BOOT_LANDLOCK"

// dropBootCaps: a seccomp-only sandbox process runs as the caller's uid
// in the caller's namespaces, so started by root it held every
// capability of the host's root. It needs none (the same sandbox runs as
// nobody with none): it gives them all up before runsc's code runs, on
// every thread, bounding and inheritable sets included, so that neither
// the re-exec for Landlock (confineBoot) nor any later exec as uid 0 gets
// them back. Without capabilities there is nothing to drop.
func dropBootCaps(args []string) {
	if _, ok := os.LookupEnv(bootLandlockEnv); !ok || !isBoot(args) {
		return
	}
	if err := dropCaps(nil); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: sandbox: drop capabilities:", err)
		os.Exit(125)
	}
}

// confineBoot is the seccomp-only sandbox's own second wall, in place of
// the chroot and namespaces it lacks: by path it may only read /proc and
// /sys, read and write /dev's nodes (null), write debug logs into the
// directory in bootLandlockEnv, and execute nothing but this binary.
// Everything else it serves (rootfs, relay, volumes, network, published
// ports) it holds as descriptors already. gVisor's own seccomp filters,
// installed later, forbid opening files by path outright; this also holds
// before they are in place, and against a bug in them. Where the kernel
// has no Landlock it does nothing.
//
// A Landlock domain is made per thread, and the Sentry's systrap may only
// ptrace stubs of its own domain: so one thread is confined and execs
// the sandbox again, which then runs, threads and stubs, in that one
// domain.
func confineBoot(args []string) {
	dirs, ok := os.LookupEnv(bootLandlockEnv)
	if !ok || !isBoot(args) {
		return
	}
	os.Unsetenv(bootLandlockEnv)
	abi := landlockABI()
	if abi == 0 {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: sandbox:", err)
		os.Exit(125)
	}
	const (
		read = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
		logs = read | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_REG
	)
	rules := []fsRule{
		{"/proc", read}, {"/sys", read},
		{"/dev", unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{exe, unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE},
	}
	for _, d := range filepath.SplitList(dirs) {
		if d != "" {
			rules = append(rules, fsRule{d, logs})
		}
	}
	goruntime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: sandbox: no_new_privs:", err)
		os.Exit(125)
	}
	// Not TRUNCATE: the Sentry sizes its memory files (memfds it makes
	// later) with ftruncate, which Landlock would refuse on a file not
	// opened by path.
	if err := landlockRestrictHandled(landlockHandled(abi)&^unix.LANDLOCK_ACCESS_FS_TRUNCATE, rules, true); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: sandbox:", err)
		os.Exit(125)
	}
	err = syscall.Exec(exe, os.Args, os.Environ())
	fmt.Fprintln(os.Stderr, "rungv: sandbox: re-exec:", err)
	os.Exit(125)
}
