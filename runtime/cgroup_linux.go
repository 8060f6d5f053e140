package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
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
// all there is, and Options.OnStart says so.
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

// episodeCgroup is the host cgroup directories of one episode (one per
// v1 hierarchy, or one v2 directory).
type episodeCgroup struct {
	dirs []string
	desc string // "cgroup v2 (memory, cpu)"
}

// newEpisodeCgroup makes the episode's cgroup with memBytes and cpus as
// limits (0: none), or returns nil when this process may not (no error:
// the Sentry's limits still apply).
func newEpisodeCgroup(id string, memBytes int64, cpus float64) (*episodeCgroup, error) {
	if memBytes <= 0 && cpus <= 0 {
		return nil, nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, nil
	}
	cg := &episodeCgroup{}
	var ctrls []string
	fail := func(err error) (*episodeCgroup, error) {
		cg.remove()
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EROFS) {
			return nil, nil // not permitted here
		}
		return nil, err
	}
	name := "gvx-" + id
	if v2, ok := mounts[""]; ok && v2HasControllers(filepath.Join(v2, own[""]), memBytes > 0, cpus > 0) {
		dir := filepath.Join(v2, own[""], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		cg.dirs = append(cg.dirs, dir)
		if memBytes > 0 {
			if err := writeCgroup(dir, "memory.max", strconv.FormatInt(memBytes, 10)); err != nil {
				return fail(err)
			}
			ctrls = append(ctrls, "memory")
		}
		if cpus > 0 {
			if err := writeCgroup(dir, "cpu.max", fmt.Sprintf("%d 100000", int64(cpus*100000))); err != nil {
				return fail(err)
			}
			ctrls = append(ctrls, "cpu")
		}
		cg.desc = "cgroup v2 (" + strings.Join(ctrls, ", ") + ")"
		return cg, nil
	}
	if memBytes > 0 {
		mnt, ok := mounts["memory"]
		if !ok {
			return fail(fs.ErrNotExist)
		}
		dir := filepath.Join(mnt, own["memory"], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		cg.dirs = append(cg.dirs, dir)
		if err := writeCgroup(dir, "memory.limit_in_bytes", strconv.FormatInt(memBytes, 10)); err != nil {
			return fail(err)
		}
		ctrls = append(ctrls, "memory")
	}
	if cpus > 0 {
		mnt, ok := mounts["cpu"]
		if !ok {
			return fail(fs.ErrNotExist)
		}
		dir := filepath.Join(mnt, own["cpu"], name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(err)
		}
		cg.dirs = append(cg.dirs, dir)
		if err := writeCgroup(dir, "cpu.cfs_period_us", "100000"); err != nil {
			return fail(err)
		}
		if err := writeCgroup(dir, "cpu.cfs_quota_us", strconv.FormatInt(int64(cpus*100000), 10)); err != nil {
			return fail(err)
		}
		ctrls = append(ctrls, "cpu")
	}
	cg.desc = "cgroup v1 (" + strings.Join(ctrls, ", ") + ")"
	return cg, nil
}

// add moves pid into every directory of the cgroup.
func (c *episodeCgroup) add(pid int) error {
	for _, d := range c.dirs {
		if err := writeCgroup(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// env is the supervisor's cgroupsEnv value.
func (c *episodeCgroup) env() string {
	b, _ := json.Marshal(c.dirs)
	return cgroupsEnv + "=" + string(b)
}

// remove removes the directories (already empty of processes).
func (c *episodeCgroup) remove() {
	for _, d := range c.dirs {
		_ = os.Remove(d)
	}
}

// leaveCgroups prepares the supervisor's last act, which the returned func
// does: it moves itself to the parent of each episode cgroup and removes
// the cgroup, waiting up to 5 s for the kernel to let go of the episode's
// dead processes. The parents' cgroup.procs are opened now: the
// supervisor's lockdown (supervisorProfile) opens files read-only. dirs
// are the episode's cgroup directories.
func leaveCgroups() (leave func(), dirs []string) {
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
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				err := os.Remove(d)
				if err == nil || errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
					break
				}
			}
		}
	}, dirs
}

func writeCgroup(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
}

// cgroupMounts maps each v1 controller (memory, cpu) to its hierarchy's
// mount point, and "" to the cgroup v2 mount, from /proc/self/mountinfo.
func cgroupMounts() (map[string]string, error) {
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
				if o == "memory" || o == "cpu" {
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

// v2HasControllers tells whether children of the v2 cgroup dir get the
// memory and/or cpu controllers (its cgroup.subtree_control lists them).
func v2HasControllers(dir string, memory, cpu bool) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, c := range strings.Fields(string(b)) {
		have[c] = true
	}
	return (!memory || have["memory"]) && (!cpu || have["cpu"])
}
