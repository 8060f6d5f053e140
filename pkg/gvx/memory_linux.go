package gvx

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// treeMemory is the memory of process pid and all its descendants, in
// bytes: the sum of their PSS (/proc/PID/smaps_rollup) when every one can
// be read, else the sum of their RSS (/proc/PID/status, readable for the
// sandbox's non-dumpable processes too), with pss false. -1 when pid is 0
// or gone.
func treeMemory(pid int) (bytes int64, pss bool) {
	if pid <= 0 {
		return -1, false
	}
	pids := descendants(pid)
	var sumPSS, sumRSS int64
	pss = true
	for _, p := range pids {
		dir := "/proc/" + strconv.Itoa(p)
		vp, okP := procField(dir+"/smaps_rollup", "Pss:")
		vr, okR := procField(dir+"/status", "VmRSS:")
		if !okP && !okR {
			continue // gone, or a zombie: no memory of its own
		}
		sumPSS += vp
		sumRSS += vr
		pss = pss && okP
	}
	if len(pids) == 0 {
		return -1, false
	}
	if pss {
		return sumPSS, true
	}
	return sumRSS, false
}

// descendants returns pid and every process below it, from the parent
// field of /proc/*/stat.
func descendants(pid int) []int {
	children := map[int][]int{}
	exists := false
	for _, p := range procPIDs() {
		if pp := parentPID(p); pp >= 0 {
			children[pp] = append(children[pp], p)
			exists = exists || p == pid
		}
	}
	if !exists {
		return nil
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// procPIDs lists /proc's processes.
func procPIDs() []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if p, err := strconv.Atoi(n); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// parentPID reads the parent from /proc/PID/stat (-1 if gone).
func parentPID(pid int) int {
	pp, _ := procStat(pid)
	return pp
}

// procStat reads the parent and the start time (in clock ticks since
// boot, which with the PID names one process: a reused PID starts later)
// from /proc/PID/stat; the parent is -1 if the process is gone.
func procStat(pid int) (ppid int, start uint64) {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1, 0
	}
	return parseStat(st)
}

// parseStat is procStat's reading of a /proc/PID/stat.
func parseStat(st []byte) (ppid int, start uint64) {
	// pid (comm) state ppid … starttime (field 22): comm may hold spaces
	// and parentheses.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return -1, 0
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 20 {
		return -1, 0
	}
	pp, err := strconv.Atoi(f[1])
	if err != nil {
		return -1, 0
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return -1, 0
	}
	return pp, start
}

// procField reads "Name:   123 kB" from a /proc file, in bytes.
func procField(path, name string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
