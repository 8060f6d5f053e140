package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initCmd is the hidden subcommand of the episode's init: PID 1 of a PID
// namespace of its own, so that whatever ends it (even SIGKILL) ends the
// sandbox and gofer too.
const initCmd = "_gvx-init"

// ReapTimeout bounds how long init waits, after the guest exited, for the
// sandbox and gofer to finish on their own (the gofer syncs and closes
// volumes when the sandbox releases them).
var ReapTimeout = 30 * time.Second

// episodeInit runs runsc for one container: run --detach, then waits for
// the sandbox (its child now) and lets the gofer exit by itself (runsc run
// would SIGKILL the gofer before it has flushed the volumes). Signals it gets
// are sent to the guest's init with runsc kill; SIGTERM and SIGINT start
// StopTimeout, after which the guest is killed. args are runsc's global
// flags, "run", "--bundle=B", ID.
func episodeInit(args []string) int {
	var globals []string
	for _, a := range args {
		if a == "run" {
			break
		}
		globals = append(globals, a)
	}
	if len(globals)+3 != len(args) {
		fmt.Fprintln(os.Stderr, "rungv: init: want runsc flags, run, --bundle=B, ID")
		return 125
	}
	bundle, id := args[len(args)-2], args[len(args)-1]
	// /proc must show this PID namespace: runsc writes the uid_map of
	// the children it starts through it. The mount is private to this
	// process's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init: make mounts private:", err)
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
		err = bindVolumes(filepath.Dir(strings.TrimPrefix(bundle, "--bundle=")), vols, paths)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		return 125
	}
	runsc := func(sub ...string) *exec.Cmd {
		c := exec.Command("/proc/self/exe", append(append([]string{}, globals...), sub...)...)
		c.Stderr = os.Stderr
		return c
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)

	pidFile := strings.TrimPrefix(bundle, "--bundle=") + "/sandbox.pid"
	runArgs := []string{"run", "--detach", "--pid-file=" + pidFile}
	// The published ports' guest ends (publish_linux.go), donated to the
	// guest's init at the same numbers.
	passFiles, err := inherited(passFDsEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: init:", err)
		return 125
	}
	for i := range passFiles {
		runArgs = append(runArgs, fmt.Sprintf("--pass-fd=%d:%d", 3+i, guestPassFD(i)))
	}
	start := runsc(append(runArgs, bundle, id)...)
	start.Stdin, start.Stdout = os.Stdin, os.Stdout
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
	for waiting := true; waiting; {
		select {
		case s := <-sigs:
			kill := runsc("kill", id, strconv.Itoa(int(s.(syscall.Signal))))
			kill.Stdout = io.Discard
			_ = kill.Run()
			if (s == unix.SIGTERM || s == unix.SIGINT) && grace == nil {
				grace = time.After(StopTimeout)
			}
		case <-grace:
			kill := runsc("kill", id, "KILL")
			kill.Stdout = io.Discard
			_ = kill.Run()
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
