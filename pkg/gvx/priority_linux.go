package gvx

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A warm boot's CPU priority (PoolConfig.RefillNice), on Linux.
//
// With autogroups (sched(7); kernel.sched_autogroup_enabled, on by default
// in most distributions) every session is one scheduling group, and a
// thread's own nice value only weighs inside its group. runsc starts the
// Sentry and the gofer in sessions of their own, and the pool starts a
// warm boot's rungv in one (Sandbox.ownSession; a seccomp-only Sentry
// stays in rungv's), so every autogroup below the boot's rungv is the
// episode's alone. The pool sets their nice (/proc/PID/autogroup), which
// their owner may set to 0 or more and back without privilege, so it works
// for an unprivileged pool too.
//
// Threads keep their own nice values: gVisor's systrap runs its stub
// threads one nice step below the Sentry's nice at the platform's start
// (systrap.initSysmsgThreadPriority), so a Sentry reniced while it boots
// would run every later guest process niced, and lowering a nice value
// again needs CAP_SYS_NICE. Where autogroups do not weigh (autogroups off,
// or the episode in a cpu cgroup other than the root) RefillNice has no
// effect and RefillDelay is what keeps the boots behind the claims.
type treePriority struct {
	nice int // the warm boot's
	// own is this process's autogroup, left alone; ownNice its nice, what
	// a ready episode's autogroups get back.
	own     string
	ownNice int
}

// newTreePriority is the priority of warm boots at nice n, or nil if this
// process's autogroup runs at n or lower already, or the kernel has none.
// A process in no autogroup (own "": a tree started below init that never
// called setsid, as a CI agent or a container's entrypoint may be) runs in
// the root task group, where each of its threads weighs as nice 0; the
// episode's sessions still get autogroups of their own, so their nice
// still weighs against the pool's threads.
func newTreePriority(n int) *treePriority {
	own, nice, err := autogroup(os.Getpid())
	if err != nil || nice >= n {
		return nil
	}
	return &treePriority{nice: n, own: own, ownNice: nice}
}

// treeWalk finds the processes of one episode's tree cheaply, pass after
// pass: reading every /proc/PID/stat costs ~75 µs a process on a busy host
// (15 ms for 200), too much 20 times a second for 8 boots, so a walk
// reads the stat of a PID once, and none of the PIDs that ran before the
// boot started (they cannot be its processes).
type treeWalk struct {
	tp      *treePriority
	before  map[int]bool    // PIDs before the boot: not the episode's
	parent  map[int]procID  // PID → parent and start, read once
	members map[int]bool    // the episode's processes
	lowered map[string]bool // autogroups set to the boot's nice
}

// procID is a process as a walk saw it: its parent, and its start time,
// which tells it from a later process with the same PID.
type procID struct {
	ppid  int
	start uint64
}

func (tp *treePriority) walk() *treeWalk {
	w := &treeWalk{tp: tp, before: map[int]bool{}, parent: map[int]procID{}, members: map[int]bool{}, lowered: map[string]bool{}}
	for _, p := range procPIDs() {
		w.before[p] = true
	}
	return w
}

// update learns the tree at root now (its members).
func (w *treeWalk) update(root int) {
	live := map[int]bool{}
	checked := map[int]bool{} // parents of new processes, looked at again this pass
	for _, p := range procPIDs() {
		live[p] = true
		if _, ok := w.parent[p]; ok || w.before[p] && p != root {
			continue
		}
		pp, start := procStat(p)
		w.parent[p] = procID{pp, start}
		if !checked[pp] {
			checked[pp] = true
			w.recheck(pp)
		}
	}
	for p := range w.parent {
		if !live[p] {
			delete(w.parent, p)
			delete(w.members, p)
		}
	}
	for p := range w.before {
		if !live[p] {
			delete(w.before, p) // the PID may come back as the episode's
		}
	}
	for grew := true; grew; { // parents before children, whatever the PIDs
		grew = false
		for p, pp := range w.parent {
			if !w.members[p] && (p == root || w.members[pp.ppid]) {
				w.members[p], grew = true, true
			}
		}
	}
}

// recheck reads p's stat again (a new process names it as its parent):
// a PID the walk knew whose process ended and whose number another took
// since the last pass (PIDs wrap around fast where pid_max is 32768, and
// a guest's own stubs use them up) is that other process now, a member
// only if its own parents make it one. Without it the children of any
// host process that took a member's PID were members, and the pool (as
// root) set their sessions' nice (TestTreeWalkReusedParentPID).
func (w *treeWalk) recheck(p int) {
	old, ok := w.parent[p]
	if !ok {
		return
	}
	if pp, start := procStat(p); start != 0 && start != old.start {
		w.parent[p] = procID{pp, start}
		delete(w.members, p)
	}
}

// set gives the autogroups of the episode's processes (its members),
// other than this process's, the boot's nice (boot) or back the pool's own
// (only those it set while booting), each through the first of its
// processes whose /proc/PID/autogroup this process may write (in a nested
// user namespace some are not its own). settled reports that nothing was
// changed or is waiting to be, and grew that an autogroup was not in seen
// (which set adds it to): a process that starts a session after it was
// first looked at (a child between fork and setsid) has a new one, so a
// caller looks at all of them again until neither. A process that went
// meanwhile is skipped; an autogroup the kernel asks to wait for (EAGAIN:
// writers without CAP_SYS_ADMIN may change one only every 100 ms,
// host-wide) leaves it unsettled. An autogroup none of whose processes
// let it be written is err (the pass goes on); it stays as it is.
func (w *treeWalk) set(boot bool, seen map[string]bool) (settled, grew bool, err error) {
	tp := w.tp
	n := tp.ownNice
	if boot {
		n = tp.nice
	}
	settled = true
	done := map[string]bool{}
	refused := map[string]error{}
	for p := range w.members {
		g, gn, gerr := autogroup(p)
		if gerr != nil || g == "" || g == tp.own || done[g] || !boot && !w.lowered[g] {
			continue // gone, in none, not the episode's own, set, or not set by us
		}
		if !seen[g] {
			seen[g], grew = true, true
		}
		if gn == n {
			done[g] = true
			continue
		}
		same, e := setAutogroupIf(p, w.parent[p].start, n)
		if e == nil && !same {
			continue // gone since, and its PID another's now
		}
		switch {
		case e == nil || errors.Is(e, unix.EAGAIN):
			done[g], settled = true, false
			if boot && e == nil {
				w.lowered[g] = true
			}
		case gone(e):
		default:
			if refused[g] == nil {
				refused[g] = fmt.Errorf("gvx: nice %d for the autogroup of episode process %d (/proc/%d/autogroup): %w (PoolConfig.RefillNice -1 leaves warm boots at the pool's priority)", n, p, p, e)
			}
		}
	}
	for g, e := range refused {
		if !done[g] && err == nil {
			err = e
		}
	}
	return settled, grew, err
}

func gone(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, os.ErrNotExist)
}

// autogroup reads /proc/PID/autogroup: "/autogroup-123 nice 0". A
// process in no autogroup (the kernel's default one, which is the root
// task group: init and whatever it started that never called setsid)
// reads as empty: name "" at nice 0.
func autogroup(pid int) (name string, nice int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	if err != nil {
		return "", 0, err
	}
	return parseAutogroup(pid, b)
}

func parseAutogroup(pid int, b []byte) (name string, nice int, err error) {
	f := strings.Fields(string(bytes.TrimSpace(b)))
	if len(f) == 0 {
		return "", 0, nil
	}
	if len(f) != 3 || f[1] != "nice" || !strings.HasPrefix(f[0], "/autogroup-") {
		return "", 0, fmt.Errorf("gvx: /proc/%d/autogroup: unexpected %q", pid, b)
	}
	nice, err = strconv.Atoi(f[2])
	if err != nil {
		return "", 0, fmt.Errorf("gvx: /proc/%d/autogroup: unexpected %q", pid, b)
	}
	return f[0], nice, nil
}

// setAutogroupIf sets the autogroup of process pid to nice n if it is
// still the process that started at start (procStat's), and reports
// whether it was. The check and the write go through one descriptor of
// /proc/PID, which names that process and no later one with its PID
// (below it, reads and opens fail once the process is gone), so a PID
// reused between them cannot take the write.
func setAutogroupIf(pid int, start uint64, n int) (bool, error) {
	d, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(d)
	st, err := readAt(d, "stat")
	if err != nil {
		return false, err
	}
	if _, s := parseStat(st); s != start {
		return false, nil
	}
	fd, err := unix.Openat(d, "autogroup", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true, err
	}
	_, err = unix.Write(fd, []byte(strconv.Itoa(n)))
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return true, err
}

// readAt reads the small file name below the directory descriptor d.
func readAt(d int, name string) ([]byte, error) {
	fd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 4096)
	k, err := unix.Read(fd, b)
	if err != nil {
		return nil, err
	}
	return b[:k], nil
}
