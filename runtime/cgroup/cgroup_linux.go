package cgroup

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Host cgroups for -m/--cpus, where the caller may make them. The Sentry
// always shapes what the guest sees (--total-memory, --cpu-num: see
// limits_linux.go); a cgroup also caps what the whole episode — Sentry,
// gofer, helpers — takes from the host. rungv makes one only when it can
// create a child of its own cgroup with the controller it needs: as root,
// or in a delegated cgroup v2 subtree. Otherwise the Sentry's shaping is
// all there is, and the runtime says so (runtime.Host.OnStart).
//
// Lifecycle: the host side creates the cgroup and moves the supervisor
// into it before the supervisor starts anything (every process of the
// episode inherits it). The supervisor removes it when the episode is
// over — it outlives everything else, even when the host side is
// SIGKILLed — by moving itself back to the parent and removing the
// directory once the kernel has let go of the episode's processes.

// cgroupsEnv passes the episode's cgroup directories to the supervisor
// (a JSON list).
const cgroupsEnv = "GVX_CGROUPS"

// Episode is the host cgroup directories of one episode (one per
// v1 hierarchy, or one v2 directory).
type Episode struct {
	dirs    []string
	Desc    string   // "cgroup v2 (memory, cpu)"
	Version string   // "cgroup v2" or "cgroup v1"
	ctrls   []string // the controllers it sets limits with
}

// cgroupLimit is one controller's settings, in v1 and v2 file names
// (written in order).
type cgroupLimit struct {
	ctrl   string
	v1, v2 [][2]string
}

// episodeLimits are the settings for memBytes, cpus and pids (0: none).
func episodeLimits(memBytes int64, cpus float64, pids int) []cgroupLimit {
	var ls []cgroupLimit
	if memBytes > 0 {
		n := strconv.FormatInt(memBytes, 10)
		ls = append(ls, cgroupLimit{"memory", [][2]string{{"memory.limit_in_bytes", n}}, [][2]string{{"memory.max", n}}})
	}
	if cpus > 0 {
		q := strconv.FormatInt(int64(cpus*100000), 10)
		ls = append(ls, cgroupLimit{"cpu", [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", q}}, [][2]string{{"cpu.max", q + " 100000"}}})
	}
	if pids > 0 {
		n := strconv.Itoa(pids)
		ls = append(ls, cgroupLimit{"pids", [][2]string{{"pids.max", n}}, [][2]string{{"pids.max", n}}})
	}
	return ls
}

// New makes the episode's cgroup with memBytes, cpus and
// pids as limits (0: none), or returns nil when this process may not (no
// error: the caller decides what that means for each limit). Where the
// pids controller alone is missing, the cgroup is made without it.
//
// record, unless nil, is called with every directory about to be made
// before the first is: the episode's state directory keeps that list
// (cgroups.json), so that whatever kills the episode (SIGKILL, the OOM
// killer) a later sweep knows what to remove. Its error is returned
// before anything is made.
func New(id string, memBytes int64, cpus float64, pids int, record func(dirs []string) error) (*Episode, error) {
	cg, err := makeEpisodeCgroup(id, episodeLimits(memBytes, cpus, pids), record)
	if cg == nil && err == nil && pids > 0 && (memBytes > 0 || cpus > 0) {
		return makeEpisodeCgroup(id, episodeLimits(memBytes, cpus, 0), record)
	}
	return cg, err
}

func makeEpisodeCgroup(id string, limits []cgroupLimit, record func([]string) error) (*Episode, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	mounts, err := Mounts()
	if err != nil {
		return nil, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, nil
	}
	cg := &Episode{}
	var ctrls []string
	fail := func(err error) (*Episode, error) {
		cg.Remove()
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EROFS) {
			return nil, nil // not permitted here
		}
		return nil, err
	}
	name := "gvx-" + id
	var want []string
	for _, l := range limits {
		want = append(want, l.ctrl)
	}
	if v2, ok := mounts[""]; ok && v2HasControllers(filepath.Join(v2, own[""]), want) {
		dir := filepath.Join(v2, own[""], name)
		if record != nil {
			if err := record([]string{dir}); err != nil {
				return nil, err
			}
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		cg.dirs = append(cg.dirs, dir)
		for _, l := range limits {
			for _, kv := range l.v2 {
				if err := writeCgroup(dir, kv[0], kv[1]); err != nil {
					return fail(err)
				}
			}
			ctrls = append(ctrls, l.ctrl)
		}
		cg.Desc = "cgroup v2 (" + strings.Join(ctrls, ", ") + ")"
		cg.Version = "cgroup v2"
		cg.ctrls = ctrls
		return cg, nil
	}
	var dirs []string
	for _, l := range limits {
		mnt, ok := mounts[l.ctrl]
		if !ok {
			return fail(fs.ErrNotExist)
		}
		dirs = append(dirs, filepath.Join(mnt, own[l.ctrl], name))
	}
	if record != nil {
		if err := record(dirs); err != nil {
			return nil, err
		}
	}
	for i, l := range limits {
		dir := dirs[i]
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		cg.dirs = append(cg.dirs, dir)
		for _, kv := range l.v1 {
			if err := writeCgroup(dir, kv[0], kv[1]); err != nil {
				return fail(err)
			}
		}
		ctrls = append(ctrls, l.ctrl)
	}
	cg.Desc = "cgroup v1 (" + strings.Join(ctrls, ", ") + ")"
	cg.Version = "cgroup v1"
	cg.ctrls = ctrls
	return cg, nil
}

// Has tells whether the cgroup enforces controller ctrl.
func (c *Episode) Has(ctrl string) bool {
	if c == nil {
		return false
	}
	for _, x := range c.ctrls {
		if x == ctrl {
			return true
		}
	}
	return false
}

// Add moves pid into every directory of the cgroup.
func (c *Episode) Add(pid int) error {
	for _, d := range c.dirs {
		if err := writeCgroup(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Env is the supervisor's cgroupsEnv value.
func (c *Episode) Env() string {
	b, _ := json.Marshal(c.dirs)
	return cgroupsEnv + "=" + string(b)
}

// Remove removes the directories (already empty of processes).
func (c *Episode) Remove() {
	if c == nil {
		return
	}
	for _, d := range c.dirs {
		_ = os.Remove(d)
	}
}

// Dirs is c's directories (nil for no cgroup).
func (c *Episode) Dirs() []string {
	if c == nil {
		return nil
	}
	return c.dirs
}

// RemoveWhenEmpty removes the cgroup once the kernel has let go of its
// dead tasks (within a few milliseconds; at most 5 s): the host side's
// last act with IsolationSeccompOnly, where it is not in the cgroup
// itself.
func (c *Episode) RemoveWhenEmpty() {
	if c == nil {
		return
	}
	for _, d := range c.dirs {
		removeCgroupDir(d)
	}
}

// removeCgroupDir removes an empty cgroup, polling from 0.5 ms up (a
// fixed 10 ms would cost every root episode ~10 ms at its end), at most
// 5 s.
func removeCgroupDir(d string) {
	wait := 500 * time.Microsecond
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(wait) {
		if wait < 10*time.Millisecond {
			wait *= 2
		}
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			return
		}
	}
}

// Leave prepares the supervisor's last act, which the returned func
// does: it moves itself to the parent of each episode cgroup and removes
// the cgroup, waiting up to 5 s for the kernel to let go of the episode's
// dead processes. The parents' cgroup.procs are opened now: the
// supervisor's lockdown (supervisorProfile) opens files read-only. dirs
// are the episode's cgroup directories.
func Leave() (leave func(), dirs []string) {
	if json.Unmarshal([]byte(os.Getenv(cgroupsEnv)), &dirs) != nil {
		return func() {}, nil
	}
	procs := make([]*os.File, len(dirs))
	for i, d := range dirs {
		procs[i], _ = os.OpenFile(filepath.Join(filepath.Dir(d), "cgroup.procs"), os.O_WRONLY, 0)
	}
	return func() {
		self := strconv.Itoa(os.Getpid())
		for i, d := range dirs {
			if procs[i] != nil {
				_, _ = procs[i].WriteString(self)
				procs[i].Close()
			}
			removeCgroupDir(d)
		}
	}, dirs
}

func writeCgroup(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
}

// Mounts maps each v1 controller (memory, cpu) to its hierarchy's
// mount point, and "" to the cgroup v2 mount, from /proc/self/mountinfo.
func Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue // a bind of a sub-cgroup: not the hierarchy's root
		}
		switch qf[0] {
		case "cgroup2":
			if _, seen := out[""]; !seen {
				out[""] = pf[4]
			}
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				if o == "memory" || o == "cpu" || o == "pids" {
					if _, seen := out[o]; !seen {
						out[o] = pf[4]
					}
				}
			}
		}
	}
	return out, s.Err()
}

// ownCgroups maps each v1 controller to this process's cgroup path in its
// hierarchy, and "" to its v2 path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// v2HasControllers tells whether children of the v2 cgroup dir get every
// controller in want (its cgroup.subtree_control lists them).
func v2HasControllers(dir string, want []string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		have[c] = true
	}
	for _, c := range want {
		if !have[c] {
			return false
		}
	}
	return true
}
