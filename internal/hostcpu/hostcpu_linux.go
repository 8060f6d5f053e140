package hostcpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Allowed returns the CPUs this thread may run on, lowest first.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("this process may run on no CPU")
	}
	return cpus, nil
}

// maxPasses bounds PinProcesses' passes: each pass after the first only
// finds threads and processes made while the one before ran.
const maxPasses = 100

// Pin confines every thread of this process to cpus, each of which it
// must be allowed now (an error names one that is not). A thread made
// later inherits the mask of the thread that makes it, and so does a
// child process: Pin before starting children.
func Pin(cpus []int) error {
	have, err := Allowed()
	if err != nil {
		return err
	}
	for _, c := range cpus {
		if !contains(have, c) {
			return fmt.Errorf("CPU %d is not one this process may run on (it may use %d CPUs: %s)", c, len(have), List(have))
		}
	}
	self := os.Getpid()
	return PinProcesses(func() []int { return []int{self} }, cpus)
}

// PinProcesses confines every thread of the processes procs lists (called
// once per pass) to cpus: all of them where cpus is empty. It passes
// until a pass finds no thread it has not set, so that a thread or
// process made during a pass by one not yet set is set by the next.
// Threads and processes that end meanwhile are skipped.
func PinProcesses(procs func() []int, cpus []int) error {
	var want unix.CPUSet
	if len(cpus) == 0 {
		for c := 0; c < len(want)*64; c++ {
			want.Set(c)
		}
	}
	for _, c := range cpus {
		if c < 0 || c >= len(want)*64 {
			return fmt.Errorf("CPU %d is out of range", c)
		}
		want.Set(c)
	}
	done := map[int]bool{}
	for range maxPasses {
		fresh := 0
		for _, pid := range procs() {
			dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
			tasks, err := os.ReadDir(dir)
			if err != nil {
				continue // ended meanwhile
			}
			for _, t := range tasks {
				tid, err := strconv.Atoi(t.Name())
				if err != nil || done[tid] {
					continue
				}
				if err := unix.SchedSetaffinity(tid, &want); err != nil && err != unix.ESRCH {
					return fmt.Errorf("sched_setaffinity of thread %d of process %d: %w", tid, pid, err)
				}
				done[tid] = true
				fresh++
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return fmt.Errorf("threads kept appearing over %d passes", maxPasses)
}

// StatusList is the Cpus_allowed_list of a /proc status file (e.g.
// /proc/PID/task/TID/status): the CPUs that task may run on, as
// taskset -c writes them ("0-1", "3").
func StatusList(status string) (string, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no Cpus_allowed_list", filepath.Clean(status))
}

// Tasks maps every thread of the processes pids to the CPUs it may run
// on (Cpus_allowed_list), by thread ID; threads and processes that end
// meanwhile are left out.
func Tasks(pids []int) map[int]string {
	out := map[int]string{}
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if l, err := StatusList(filepath.Join(dir, t.Name(), "status")); err == nil {
				out[tid] = l
			}
		}
	}
	return out
}
