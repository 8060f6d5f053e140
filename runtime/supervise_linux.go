package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/internal/hostenv"
	"z.gfire.dev/gvx/runtime/cgroup"
	episodenet "z.gfire.dev/gvx/runtime/net"
)

// superviseCmd is the hidden subcommand of the supervisor process.
const superviseCmd = "_gvx-supervise"

// nsEpisodeEnv carries the namespaced path's share of the plan
// (nsEpisode, as JSON) from the host side to the supervisor, and from it to
// init.
const nsEpisodeEnv = "GVX_EPISODE"

// nsEpisode is what the supervisor and init need of the plan: one typed
// value, never runsc's argv parsed back.
type nsEpisode struct {
	State  string   `json:"state"`  // the episode's state directory
	Runsc  []string `json:"runsc"`  // runsc's global flags (plan.runscGlobals)
	Root   string   `json:"root"`   // runsc's --root among them
	Bundle string   `json:"bundle"` // the bundle directory
	ID     string   `json:"id"`     // the container's ID
	NAT    bool     `json:"nat"`    // the supervisor sets up NAT's veth pair
	Keep   []string `json:"keep"`   // the host paths init keeps mounted (plan.mountKeep)
}

// env is e as an environment entry.
func (e nsEpisode) env() string {
	js, _ := json.Marshal(e)
	return nsEpisodeEnv + "=" + string(js)
}

// takeNSEpisode reads (and unsets) nsEpisodeEnv.
func takeNSEpisode() (nsEpisode, error) {
	v, ok := os.LookupEnv(nsEpisodeEnv)
	os.Unsetenv(nsEpisodeEnv)
	var e nsEpisode
	if !ok {
		return e, fmt.Errorf("no %s", nsEpisodeEnv)
	}
	if err := json.Unmarshal([]byte(v), &e); err != nil || e.State == "" || e.Root == "" || e.Bundle == "" || e.ID == "" {
		return e, fmt.Errorf("bad %s (%v)", nsEpisodeEnv, err)
	}
	return e, nil
}

// supervise is the supervisor: it runs in the episode's user and network
// namespaces, waits for the host side's go-ahead on fd 3, brings lo up,
// starts the episode's init (episodeInit) with the episode (nsEpisode),
// forwards signals to it, and when fd 3 reaches EOF before init is done (the host side died)
// kills it. It removes the state
// directory in every case and returns runsc's exit code. Once init runs it
// is locked down (supervisorProfile).
func supervise() int {
	ep, err := takeNSEpisode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv: supervisor:", err)
		return 125
	}
	state := ep.State
	defer removeState(state)()
	leave, cgroups := cgroup.Leave() // the episode's host cgroup, if it has one
	defer leave()
	if err := limitPids(); err != nil {
		fmt.Fprintln(os.Stderr, "rungv: --pids-limit:", err)
		return 125
	}
	socks := episodenet.ParseSockets(os.Getenv(episodenet.PublishedSocketsEnv))
	os.Unsetenv(episodenet.PublishedSocketsEnv)
	defer episodenet.RemoveSockets(socks)
	pass, err := inherited(passFDsEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv:", err)
		return 125
	}
	vols, err := inherited(volumeFDsEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rungv:", err)
		return 125
	}
	sync := os.NewFile(3, "sync")
	var b [1]byte
	if n, _ := sync.Read(b[:]); n != 1 {
		return 125 // the host side gave up before the start
	}
	if err := loUp(); err != nil {
		fmt.Fprintf(os.Stderr, "rungv: bring up lo: %v\n", err)
		return 125
	}
	if ep.NAT {
		if err := episodenet.SetupNAT(); err != nil {
			fmt.Fprintf(os.Stderr, "rungv: --network nat: %v\n", err)
			return 125
		}
	}
	// The episode's init is PID 1 of a new PID namespace: when it goes
	// (even by SIGKILL, or with this thread: Pdeathsig), the kernel kills
	// the sandbox and gofer with it.
	goruntime.LockOSThread()
	cmd := exec.Command("/proc/self/exe", initCmd, state) // state: for ps, as the supervisor's
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL, Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS}
	// The published ports' guest ends and the volume files go on to init.
	// Init's environment: hostenv's allow-list and what the host side
	// set for init; the rest (what the supervisor itself read: the
	// cgroups, the published sockets) stays here.
	cmd.Env = append(hostenv.Filter(os.Environ(), volumePathsEnv, stopTimeoutEnv), ep.env())
	inherit(cmd, passFDsEnv, pass)
	inherit(cmd, volumeFDsEnv, vols)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "rungv: start the episode's init: %v\n", err)
		return 125
	}
	for _, f := range cmd.ExtraFiles {
		f.Close() // init has them
	}
	// From here on the supervisor only waits, signals init, removes the
	// state directory and the published sockets, and leaves its cgroups
	// (supervisorProfile).
	if err := lockdownAs(supervisorProfile(cmd.Process.Pid, state, cgroups, episodenet.SocketDirs(socks))); err != nil {
		fmt.Fprintf(os.Stderr, "rungv: %v\n", err)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 125
	}
	go func() {
		_, _ = io.Copy(io.Discard, sync) // returns at EOF: the host side is gone
		_ = cmd.Process.Kill()
	}()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s) // init sends it on with runsc kill
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	return exitCode(cmd.ProcessState)
}

// StopTimeout is how long the guest has to exit after SIGTERM or SIGINT
// before it is killed, as with docker stop.
var StopTimeout = 10 * time.Second

// loUp sets IFF_UP on the loopback interface of the current network
// namespace.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// removeState returns what removes the state directory: through its
// parent, opened now, since the locked-down host side and supervisor may
// open nothing outside the state directory (Landlock: hostProfile,
// supervisorProfile), and os.RemoveAll would open the parent.
//
// The directory stays, with its lock file and records, while a host
// cgroup its record names (cgroups.json) is still there: GC (rungv gc,
// the next start) removes the cgroup once the kernel has let go of its
// tasks, and then the directory. The supervisor removes the cgroups at its
// end (cgroup.Leave); when it was killed, the host side used to remove the
// record with the directory and the cgroups were left for no one to find
// (TestKilledEpisodeCgroupsSwept, in a PID namespace whose init reaps
// slowly).
func removeState(state string) (remove func()) {
	parent, err := os.OpenRoot(filepath.Dir(state))
	if err != nil {
		return func() {
			if !cgroupsLeft(state) {
				_ = os.RemoveAll(state)
			}
		}
	}
	return func() {
		if !cgroupsLeft(state) {
			_ = parent.RemoveAll(filepath.Base(state))
		}
		parent.Close()
	}
}

// cgroupsLeft says whether a cgroup directory that state's record
// (cgroups.json) names still exists.
func cgroupsLeft(state string) bool {
	b, err := readRecord(state, stateCgroups)
	if err != nil {
		return false
	}
	var dirs []string
	if json.Unmarshal(b, &dirs) != nil {
		return false
	}
	for _, d := range dirs {
		if _, err := os.Lstat(d); err == nil {
			return true
		}
	}
	return false
}
