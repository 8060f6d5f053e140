package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/control/client"
	"gvisor.dev/gvisor/pkg/urpc"
	"gvisor.dev/gvisor/runsc/boot"
	"gvisor.dev/gvisor/runsc/container"

	episodenet "z.gfire.dev/gvx/runtime/net"
)

// initCmd is the hidden subcommand of the episode's init: PID 1 of a PID
// namespace of its own, so that whatever ends it (even SIGKILL) ends the
// sandbox and gofer too.
const initCmd = "_gvx-init"

// stopTimeoutEnv passes Host.StopTimeout (a Go duration; 0: kill at
// once) through the supervisor to init.
const stopTimeoutEnv = "GVX_STOP_TIMEOUT"

// ReapTimeout bounds how long init waits, after the guest exited, for the
// sandbox and gofer to finish on their own (the gofer syncs and closes
// volumes when the sandbox releases them).
var ReapTimeout = 30 * time.Second

// episodeInit runs runsc for one container: run --detach, then waits for
// the sandbox (its child now) and lets the gofer exit by itself (runsc run
// would SIGKILL the gofer before it has flushed the volumes). Then it locks
// itself down (initProfile). Signals it gets are sent to the guest's init
// as runsc kill would send them, over a connection to the sandbox's
// control server opened before the lockdown; SIGTERM and SIGINT start
// StopTimeout, after which the guest is killed. The episode is the
// supervisor's nsEpisode.
func episodeInit() int {
	ep, err := takeNSEpisode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		return 125
	}
	id := ep.ID
	// /proc must show this PID namespace: runsc writes the uid_map of
	// the children it starts through it. Mounts made here stay in this
	// process's mount namespace: its copy of the host's tree is a slave
	// (as runsc makes the sandbox's and the gofer's), so nothing goes
	// back to the host, while an unmount on the host reaches the copy.
	// A private copy kept every host filesystem mounted when the episode
	// started mounted until it ended (TestHostUnmountNotPinned).
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init: make mounts slaves:", err)
		return 125
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init: mount /proc:", err)
		return 125
	}
	vols, err := inherited(volumeFDsEnv)
	var paths []string
	if err == nil && len(vols) > 0 {
		err = json.Unmarshal([]byte(os.Getenv(volumePathsEnv)), &paths)
	}
	if err == nil {
		err = bindVolumes(ep.State, vols, paths)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		return 125
	}
	// The copy holds every host mount, a private one pinned until the
	// episode ends: keep only what the episode needs (prunemounts_linux.go),
	// once /proc is this namespace's and the volumes are bound in the
	// state directory (their paths are the host's).
	root := filepath.Join(ep.State, "root")
	err = os.Mkdir(root, 0o700)
	if err == nil {
		err = pruneMounts(keepForInit(ep), root)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init: prune the host's mounts:", err)
		return 125
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)

	pidFile := filepath.Join(ep.Bundle, "sandbox.pid")
	// The control server closes idle connections at once when the guest
	// exits (by default it waits 15 s for them): init holds one open.
	runArgs := append(append([]string{}, ep.Runsc...), "--control-rpc-stop-timeout=0", "run", "--detach", "--pid-file="+pidFile)
	// The published ports' guest ends (runtime/net), donated to the
	// guest's init at the same numbers.
	passFiles, err := inherited(passFDsEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		return 125
	}
	for i := range passFiles {
		runArgs = append(runArgs, fmt.Sprintf("--pass-fd=%d:%d", 3+i, episodenet.GuestPassFD(i)))
	}
	start := exec.Command("/proc/self/exe", append(runArgs, "--bundle="+ep.Bundle, id)...)
	start.Stdin, start.Stdout, start.Stderr = os.Stdin, os.Stdout, os.Stderr
	start.ExtraFiles = passFiles
	err = start.Run()
	for _, f := range passFiles {
		f.Close() // the sandbox has them
	}
	if err != nil {
		reap(ReapTimeout)
		return 125
	}
	// The sandbox was re-parented to this init when runsc run --detach
	// exited; its exit status is the guest's (runsc boot exits with it).
	pid, err := os.ReadFile(pidFile)
	sandbox, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil || sandbox <= 0 {
		fmt.Fprintf(os.Stderr, "rungv: init: no sandbox PID in %s: %v\n", pidFile, err)
		reap(ReapTimeout)
		return 125
	}
	// Signals go to the guest over one connection to the sandbox's
	// control server, opened now: after the lockdown init can neither
	// exec runsc kill nor open a socket. A guest that is already gone
	// (its sandbox stops serving as it exits) leaves none: then only
	// SIGKILL is sent, to the sandbox itself.
	ctl, err := dialSandbox(ep.Root, id)
	if err == nil {
		defer ctl.Close()
	}
	if err := lockdownAs(initProfile(sandbox)); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		_ = unix.Kill(sandbox, unix.SIGKILL)
		reap(ReapTimeout)
		return 125
	}
	signalGuest := func(s unix.Signal) {
		args := boot.SignalArgs{CID: id, Signo: int32(s), Mode: boot.DeliverToProcess}
		if (ctl == nil || ctl.Call(boot.ContMgrSignal, &args, nil) != nil) && s == unix.SIGKILL {
			// The Sentry does not answer: end the sandbox itself.
			_ = unix.Kill(sandbox, unix.SIGKILL)
		}
	}
	type result struct {
		ws  unix.WaitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(sandbox, &ws, 0, nil)
			if err != unix.EINTR {
				done <- result{ws, err}
				return
			}
		}
	}()
	code := 125
	var grace <-chan time.Time
	stopTimeout := StopTimeout
	if d, err := time.ParseDuration(os.Getenv(stopTimeoutEnv)); err == nil && d >= 0 {
		stopTimeout = d
	}
	for waiting := true; waiting; {
		select {
		case s := <-sigs:
			if (s == unix.SIGTERM || s == unix.SIGINT) && stopTimeout == 0 {
				_ = unix.Kill(sandbox, unix.SIGKILL) // at once (Host.StopTimeout)
				continue
			}
			signalGuest(s.(syscall.Signal))
			if (s == unix.SIGTERM || s == unix.SIGINT) && grace == nil {
				grace = time.After(stopTimeout)
			}
		case <-grace:
			signalGuest(unix.SIGKILL)
		case r := <-done:
			waiting = false
			switch {
			case r.err != nil:
				fmt.Fprintln(os.Stderr, "rungv: init: wait for the sandbox:", r.err)
			case r.ws.Signaled():
				code = 128 + int(r.ws.Signal())
			default:
				code = r.ws.ExitStatus()
			}
		}
	}
	// The gofer exits once the sandbox's connections are gone, after
	// syncing and closing the volumes. runsc's state files go with the
	// episode's state directory.
	reap(ReapTimeout)
	return code
}

// reap waits, as init of the namespace, until no child is left or the
// timeout passes.
func reap(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.ECHILD:
			return
		case err == unix.EINTR || err == nil && pid > 0:
			continue
		case err != nil:
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialSandbox connects to the control server of sandbox id, whose state
// is under runsc's --root root, as runsc kill
// does (container.Load, then the sandbox's control socket).
func dialSandbox(root, id string) (*urpc.Client, error) {
	c, err := container.Load(root, container.FullID{SandboxID: id, ContainerID: id}, container.LoadOpts{Exact: true, SkipCheck: true})
	if err != nil {
		return nil, fmt.Errorf("load the sandbox's state: %w", err)
	}
	path := c.Sandbox.ControlSocketPath
	if len(path) >= linux.UnixPathMax {
		// Too long for a sockaddr_un: connect through /proc/self/fd, as
		// runsc's own sandboxConnect does.
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("the control socket: %w", err)
		}
		defer unix.Close(fd)
		path = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	ctl, err := client.ConnectTo(path)
	if err != nil {
		return nil, fmt.Errorf("connect to the sandbox's control server: %w", err)
	}
	return ctl, nil
}
