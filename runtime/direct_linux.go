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

	"z.gfire.dev/gvx/runtime/checkpoint"
	"z.gfire.dev/gvx/runtime/lockdown"
	episodenet "z.gfire.dev/gvx/runtime/net"
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

// runDirect runs the prepared episode with IsolationSeccompOnly. It reads
// the plan, never runsc's argv or the bundle's annotations, in stages:
// the spec to boot (bootSpec), the sandbox's flags and descriptors
// (bootFlags, bootMounts, bootControl, bootSync), the start (startBoot),
// the guest's start or restore (startGuest) and the wait (waitDirect).
func (ep *episode) runDirect(p *plan, pub *episodenet.Publisher, nat *episodenet.NAT, lim *hostLimits, start func(pid int) error) (int, error) {
	b := &directBoot{redial: -1}
	defer b.close()
	for _, stage := range []func() error{
		func() error { return b.bootSpec(p) },
		func() error { return b.bootFlags(p, pub) },
		func() error { return b.bootMounts(p) },
		func() error { return b.bootControl(p) },
		func() error { return b.bootSync(p, nat, pub) },
	} {
		if err := stage(); err != nil {
			return 0, err
		}
	}
	cmd, done, err := b.startBoot(p, pub)
	if err != nil {
		return 0, err
	}
	fail := func(err error) (int, error) {
		_ = cmd.Process.Kill()
		<-done
		return 0, err
	}
	if err := start(cmd.Process.Pid); err != nil {
		return fail(err)
	}
	var one [1]byte
	if n, _ := b.syncR.Read(one[:]); n != 1 {
		err := <-done
		tail := bootLogTail(p.state)
		return 0, fmt.Errorf("seccomp-only: the sandbox failed to boot (%v)%s%s", err, bootHint(tail), tail)
	}
	if err := b.startGuest(p, nat, pub); err != nil {
		return fail(err)
	}
	return b.waitDirect(ep, p, cmd, done, lim)
}

// directBoot is what runDirect gives the sandbox and keeps to drive it.
type directBoot struct {
	oci     *specs.Spec // the spec booted: the plan's, or the checkpoint's
	ociJSON []byte
	id      string     // the container's ID
	rootfs  rootfsPlan // the plan's, or the checkpoint's

	restore     []*os.File      // the checkpoint's files (Host.RestoreFrom)
	restoreInfo *CheckpointInfo // and what it records

	files   fileList // the sandbox's descriptors
	args    []string // and its flags, boot's after "boot"
	passFDs []int    // where the published ports' pairs are

	srv        *lisafs.Server // the volumes' server
	conns      []*lisafs.Connection
	volConns   []*volume.Conn
	volTargets []string

	ctlPath string
	ctl     *urpc.Client
	redial  int // a socket for the control connection after a restore; -1: none
	syncR   *os.File
	env     []string
	gc      *gcHold
	natLink *os.File
	ck      *checkpoint.Controller
}

// close releases what b holds, in the reverse order of the stages.
func (b *directBoot) close() {
	if b.ck != nil {
		b.ck.Close()
	}
	if b.gc != nil {
		b.gc.release()
	}
	if b.syncR != nil {
		b.syncR.Close()
	}
	if b.redial >= 0 {
		unix.Close(b.redial)
	}
	if b.ctl != nil {
		b.ctl.Close()
	}
	if b.srv != nil {
		b.srv.Destroy()
	}
	b.files.closeAll()
	for _, f := range b.restore {
		f.Close()
	}
}

// bootSpec picks the spec the sandbox boots: the plan's, or for a restore
// (Host.RestoreFrom) the checkpoint's own, with its container ID and
// rootfs (the saved kernel's tasks carry the ID, and gVisor validates the
// spec against the saved one), written into the bundle for runsc.
func (b *directBoot) bootSpec(p *plan) error {
	b.oci, b.ociJSON, b.id, b.rootfs = p.oci, p.ociJSON, "gvx-"+p.id, p.rootfs
	dir := p.host.RestoreFrom
	if dir == "" {
		return nil
	}
	var js []byte
	var err error
	if b.restore, js, b.restoreInfo, err = checkpoint.Open(dir); err != nil {
		return err
	}
	if err := checkRestoreMatches(p, b.restoreInfo); err != nil {
		return err
	}
	var oci *specs.Spec
	if err := json.Unmarshal(js, &oci); err != nil || oci == nil {
		return fmt.Errorf("seccomp-only: --restore %s: its config.json is no OCI spec (%v): take the checkpoint again", dir, err)
	}
	if b.rootfs, err = checkpointRootfs(oci); err != nil {
		return fmt.Errorf("seccomp-only: --restore %s: %w", dir, err)
	}
	b.oci, b.ociJSON, b.id = oci, js, b.restoreInfo.ContainerID
	return os.WriteFile(filepath.Join(p.bundle, "config.json"), js, 0o644)
}

// checkpointRootfs is the rootfs a checkpoint's spec names (writeBundle
// wrote it when the checkpointed episode started): the restored kernel
// runs on it; its first files are in the saved memory layer already.
func checkpointRootfs(oci *specs.Spec) (rootfsPlan, error) {
	a := oci.Annotations
	if a[annRootfsType] != "erofs" || a[annRootfsSource] == "" {
		return rootfsPlan{}, errors.New("the rootfs must be an EROFS image")
	}
	readonly := oci.Root != nil && oci.Root.Readonly
	return rootfsPlan{image: a[annRootfsSource], overlay: !readonly && a[annRootfsOverlay] != "none"}, nil
}

// bootFlags starts the sandbox's command line: the plan's runsc flags,
// runsc boot's own, the spec and the published ports' descriptors.
func (b *directBoot) bootFlags(p *plan, pub *episodenet.Publisher) error {
	specFile, err := os.Open(filepath.Join(p.bundle, "config.json"))
	if err != nil {
		return err
	}
	b.args = append(p.runscGlobals(), "--directfs=false", "--control-rpc-stop-timeout=0")
	// The sandbox's own stderr (runsc's fatal errors, Go's panics) goes to
	// a file in the state directory, for the error message; the guest's
	// stdio is moved off 0-2 first (remapBootStdio).
	panicLog, err := os.OpenFile(filepath.Join(p.state, "panic.log"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		specFile.Close()
		return err
	}
	b.args = append(b.args, "--panic-log-fd="+b.files.add(panicLog))
	b.args = append(b.args, "boot", "--bundle="+p.bundle, "--attached",
		"--spec-fd="+b.files.add(specFile), "--stdio-fds=0,1,2")
	if p.host.ProfileDir != "" {
		// Opened here, before this process and the sandbox lock down:
		// the sandbox writes it through the descriptor when it ends.
		prof, err := os.OpenFile(p.profilePath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return fmt.Errorf("profile: %w (Host.ProfileDir, RUNGV_PROFILE_DIR: a directory this process can write)", err)
		}
		b.args = append(b.args, "--profile-cpu-fd="+b.files.add(prof))
	}
	// The published ports' pairs come first, at numbers that do not
	// depend on anything a restore does differently (it passes no
	// --rootfs-upper-tar-fd, which a NAT episode's resolv.conf makes): the
	// guest's end of each is a host socket whose descriptor number gVisor
	// saves and uses again after a restore (transport.HostSender).
	b.passFDs = []int{} // recorded as [] when there are none (nil: an older checkpoint)
	for i, f := range pub.GuestFiles() {
		fd := b.files.add(f)
		b.args = append(b.args, fmt.Sprintf("--pass-fd=%s:%d", fd, episodenet.GuestPassFD(i)))
		n, _ := strconv.Atoi(fd)
		b.passFDs = append(b.passFDs, n)
	}
	return checkRestorePassFDs(&p.host, b.restoreInfo, b.passFDs)
}

// bootMounts gives the sandbox its filesystems, in the order of runsc's
// gofer mount configurations: the rootfs, then every mount of the spec
// booted that has one (EROFS images, opened here; volumes, served here
// over a socket pair each).
func (b *directBoot) bootMounts(p *plan) error {
	rootfs, err := os.Open(b.rootfs.image)
	if err != nil {
		return fmt.Errorf("seccomp-only: the rootfs image: %w", err)
	}
	upper := specutils.NoOverlay
	if b.rootfs.overlay {
		upper = specutils.MemoryOverlay
	}
	ioFDs := []string{b.files.add(rootfs)}
	confs := []string{specutils.GoferMountConf{Lower: specutils.Erofs, Upper: upper}.String()}
	b.srv = lisafs.NewServer()
	served := map[string]bool{}
	for _, m := range b.oci.Mounts {
		if !specutils.HasMountConfig(m) {
			continue
		}
		fd, err := b.mountFD(p, m, served)
		if err != nil {
			return err
		}
		ioFDs = append(ioFDs, fd)
		lower := specutils.Lisafs
		if specutils.IsErofsMount(m) {
			lower = specutils.Erofs
		}
		confs = append(confs, specutils.GoferMountConf{Lower: lower, Upper: specutils.NoOverlay}.String())
	}
	b.args = append(b.args, "--io-fds="+strings.Join(ioFDs, ","), "--gofer-mount-confs="+strings.Join(confs, ","))
	if b.rootfs.upperTar != "" {
		f, err := os.Open(b.rootfs.upperTar)
		if err != nil {
			return err
		}
		b.args = append(b.args, "--rootfs-upper-tar-fd="+b.files.add(f))
	}
	return nil
}

// mountFD is the sandbox's descriptor for the spec mount m: the EROFS
// image it names, or the sandbox's end of a connection to this process's
// server of the plan's volume at its destination. A bind mount of a host
// directory needs runsc's gofer and is refused.
func (b *directBoot) mountFD(p *plan, m specs.Mount, served map[string]bool) (string, error) {
	if specutils.IsErofsMount(m) {
		f, err := os.Open(m.Source)
		if err != nil {
			return "", fmt.Errorf("seccomp-only: EROFS image %s: %w", m.Source, err)
		}
		return b.files.add(f), nil
	}
	v, ok := p.volumeAt(m.Destination)
	if !ok || served[m.Destination] {
		return "", fmt.Errorf("%w: %s: a bind mount of a host directory needs runsc's gofer, which --isolation seccomp-only does not have: use a volume, or --isolation namespaces where the host allows user namespaces", ErrUnsupported, p.mountField(m.Destination))
	}
	served[m.Destination] = true
	var stats *os.File
	if p.host.ProfileDir != "" {
		// This process serves the volume: it keeps the counters itself.
		var err error
		if stats, err = os.OpenFile(p.volumeStatsPath(v), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err != nil {
			return "", fmt.Errorf("volume stats: %w (Host.ProfileDir, RUNGV_PROFILE_DIR: a directory this process can write)", err)
		}
	}
	impl, opts, err := volume.ServeStats(v.file, p.volumeMount(v), volume.DefaultSyncEvery, stats, nil)
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", v.field, v.source, err)
	}
	b.volConns = append(b.volConns, impl.(*volume.Conn))
	b.volTargets = append(b.volTargets, v.target)
	ours, theirs, err := unet.SocketPair(false)
	if err != nil {
		return "", fmt.Errorf("seccomp-only: %s (%s): %w", v.field, v.target, err)
	}
	conn, err := b.srv.CreateConnection(ours, v.target, opts, impl)
	if err != nil {
		ours.Close()
		theirs.Close()
		return "", fmt.Errorf("seccomp-only: %s (%s): %w", v.field, v.target, err)
	}
	b.conns = append(b.conns, conn)
	fd, _ := theirs.Release()
	return b.files.add(os.NewFile(uintptr(fd), "volume "+v.target)), nil
}

// bootControl makes the sandbox's control socket, in the state directory
// (0700), and this process's connection to it (and, for a restore, the
// socket of the connection after it).
func (b *directBoot) bootControl(p *plan) error {
	b.ctlPath = filepath.Join(p.state, "ctl")
	ctlFD, err := server.CreateSocket(b.ctlPath)
	if err != nil {
		return fmt.Errorf("seccomp-only: the sandbox's control socket %s: %w", b.ctlPath, err)
	}
	// Listening now (the control server listens again when it starts),
	// so that the connection below waits in the backlog.
	if err := unix.Listen(ctlFD, 16); err != nil {
		unix.Close(ctlFD)
		return fmt.Errorf("seccomp-only: the sandbox's control socket %s: %w", b.ctlPath, err)
	}
	b.args = append(b.args, "--controller-fd="+b.files.add(os.NewFile(uintptr(ctlFD), "control")))
	// Connected now, before this process locks down (no socket after
	// that); the sandbox's control server accepts it once it runs.
	if b.ctl, err = client.ConnectTo(b.ctlPath); err != nil {
		return fmt.Errorf("seccomp-only: connect to the sandbox's control socket: %w", err)
	}
	// A restore replaces the control server's handlers and drops every
	// connection (gVisor's refreshHandlers): a socket made now, before
	// the lockdown, connects again afterwards (restoreSocket).
	if b.restore != nil {
		if b.redial, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			b.redial = -1
			return fmt.Errorf("seccomp-only: restore: %w", err)
		}
	}
	return nil
}

// bootSync makes the start's sync pipe, the sandbox's environment, the
// hold on a restoring Sentry's collector, and the checkpoint.Controller of an
// episode with Host.CheckpointDir.
func (b *directBoot) bootSync(p *plan, nat *episodenet.NAT, pub *episodenet.Publisher) error {
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return err
	}
	b.syncR = syncR
	b.args = append(b.args, "--start-sync-fd="+b.files.add(syncW))
	b.env = append(bootEnv(), bootStdioEnv+"=1", bootLandlockEnv+"="+p.host.DebugLogDir)
	// A restore's Sentry runs without Go's collector until the restore
	// RPC returns (bootgc_linux.go).
	if b.restore != nil {
		b.gc = &gcHold{}
		e, err := b.gc.holdGC(&b.files)
		if err != nil {
			return err
		}
		b.env = append(b.env, e)
	}
	if nat != nil {
		b.natLink = nat.Child
	}
	if p.host.CheckpointDir == "" {
		return nil
	}
	files, err := checkpoint.Create(p.host.CheckpointDir, b.ociJSON, CheckpointInfo{ContainerID: b.id, Volumes: b.volTargets, Network: p.network, PassFDs: b.passFDs})
	if err != nil {
		return err
	}
	b.ck = checkpoint.NewController(b.id, b.ctl, files, b.volConns, func() { _ = pub.RelayWord(episodenet.LinksSave, relayLinksWait) })
	return nil
}

// startBoot starts the sandbox (runsc boot, this binary) with what the
// stages gave it; done gets its wait's result. Its memory and CPUs are
// the bundle's (patchBootArgs, in the sandbox process, as for runsc run).
func (b *directBoot) startBoot(p *plan, pub *episodenet.Publisher) (*exec.Cmd, chan error, error) {
	cmd := exec.Command("/proc/self/exe", append(b.args, b.id)...)
	cmd.Args[0] = "runsc-sandbox"
	setStdio(cmd, &p.host)
	cmd.ExtraFiles = b.files.files
	cmd.Env = b.env
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
		return nil, nil, fmt.Errorf("seccomp-only: start the sandbox: %w", err)
	}
	b.files.closeAll() // the sandbox has them
	pub.CloseGuestFiles()
	for _, c := range b.conns {
		b.srv.StartConnection(c)
	}
	return cmd, done, nil
}

// startGuest, once the sandbox has booted, sets up the guest's network
// and starts the guest, or restores the checkpoint.
func (b *directBoot) startGuest(p *plan, nat *episodenet.NAT, pub *episodenet.Publisher) error {
	if err := b.ctl.Call(boot.ContMgrSetNetworkArgs, directNetwork(b.natLink), nil); err != nil {
		return fmt.Errorf("seccomp-only: set up the guest's network: %w%s", err, bootLogTail(p.state))
	}
	if b.natLink != nil {
		b.natLink.Close() // the sandbox has it
		if err := nat.ServeLink(); err != nil {
			return err
		}
	}
	if b.restore == nil {
		if err := b.ctl.Call(boot.ContMgrRootContainerStart, &b.id, nil); err != nil {
			return fmt.Errorf("seccomp-only: start the guest: %w%s", err, bootLogTail(p.state))
		}
		return nil
	}
	dir := p.host.RestoreFrom
	err := checkpoint.RestoreSandbox(b.ctl, b.restore)
	b.gc.release()
	if err != nil {
		return fmt.Errorf("seccomp-only: restore %s: %w%s", dir, err, bootLogTail(p.state))
	}
	c, err := checkpoint.RedialControl(b.redial, b.ctlPath)
	b.redial = -1
	if err != nil {
		return fmt.Errorf("seccomp-only: restore %s: reconnect to the sandbox's control server: %w", dir, err)
	}
	b.ctl.Close()
	b.ctl = c
	if b.ck != nil {
		b.ck.SetClient(c)
	}
	// The guest's own bridges (dockerd's docker0) were not saved.
	if err := pub.RelayWord(episodenet.LinksRestore, 0); err != nil {
		return fmt.Errorf("seccomp-only: restore %s: tell the guest's relay: %w", dir, err)
	}
	return nil
}

// waitDirect waits for the sandbox, forwarding signals to the guest over
// the control connection, then for the volumes' final sync.
func (b *directBoot) waitDirect(ep *episode, p *plan, cmd *exec.Cmd, done chan error, lim *hostLimits) (int, error) {
	if b.ck != nil && p.host.Control != nil {
		go b.ck.Serve(p.host.Control)
	}
	code, err := waitChild(ep.ctx, ep.sigs, cmd, done, p.stopGrace(), func(s unix.Signal) {
		args := boot.SignalArgs{CID: b.id, Signo: int32(s), Mode: boot.DeliverToProcess}
		if b.ctl.Call(boot.ContMgrSignal, &args, nil) != nil && s == unix.SIGKILL {
			_ = cmd.Process.Kill()
		}
	})
	// The sandbox (with its stubs) was all the cgroup held: remove it now,
	// before the volumes' final sync, which may take a while after a
	// guest that wrote much; a SIGKILL from a caller that would not wait
	// (the SDK's Close after its bound) then leaves no cgroup.
	lim.cg.RemoveWhenEmpty()
	// The volumes' connections end with the sandbox's ends: each syncs
	// and closes its volume then.
	b.srv.Wait()
	if b.ck != nil {
		b.ck.AwaitTold()
	}
	if b.ck != nil && b.ck.Ended() && err == nil {
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
	subnet := net.IPNet{IP: episodenet.GuestIP.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
	args.FDBasedLinks = []boot.FDBasedLink{{
		Name:                 episodenet.GuestIf,
		MTU:                  episodenet.MTU,
		Addresses:            []boot.IPWithPrefix{{Address: episodenet.GuestIP, PrefixLen: 24}},
		Routes:               []boot.Route{{Destination: subnet}},
		LinkAddress:          episodenet.GuestMAC,
		Neighbors:            []boot.Neighbor{{IP: episodenet.GatewayIP, HardwareAddr: episodenet.HostMAC}, {IP: episodenet.DNSIP, HardwareAddr: episodenet.HostMAC}},
		NumChannels:          1,
		ProcessorsPerChannel: 1,
		IsPacket:             []bool{false},
		PreConfigured:        true,
	}}
	args.Defaultv4Gateway = boot.DefaultRoute{Name: episodenet.GuestIf, Route: boot.Route{
		Destination: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Gateway: episodenet.GatewayIP}}
	args.FilePayload = urpc.FilePayload{Files: []*os.File{link}}
	return args
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
	if err := lockdown.DropCaps(nil); err != nil {
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
	abi := lockdown.LandlockABI()
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
	rules := []lockdown.Rule{
		{Path: "/proc", Access: read}, {Path: "/sys", Access: read},
		{Path: "/dev", Access: unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{Path: exe, Access: unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE},
	}
	for _, d := range filepath.SplitList(dirs) {
		if d != "" {
			rules = append(rules, lockdown.Rule{Path: d, Access: logs})
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
	if err := lockdown.LandlockRestrictHandled(lockdown.LandlockHandled(abi)&^unix.LANDLOCK_ACCESS_FS_TRUNCATE, rules, true); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: sandbox:", err)
		os.Exit(125)
	}
	err = syscall.Exec(exe, os.Args, os.Environ())
	fmt.Fprintln(os.Stderr, "rungv: sandbox: re-exec:", err)
	os.Exit(125)
}
