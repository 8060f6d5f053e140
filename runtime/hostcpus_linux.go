package runtime

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinHostCPUs confines every thread of this process to the host CPUs
// cpus (Host.CPUs), before any child starts: the sandbox, its stubs and
// the gofer inherit the mask from the thread that forks them, and so do
// the threads the Go runtime makes later. Empty cpus leaves the mask
// alone. A CPU this process may not run on is an error naming it.
//
// Why: on a machine where waking a thread on another CPU is dear (a
// PVM guest: an IPI is a hypercall), the Sentry and its stubs, which
// wake each other on every guest system call, cost far less CPU on one
// CPU than spread over several (docs/runtime.md, "What a healthy, idle
// project costs per second").
func pinHostCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	var have, want unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		return fmt.Errorf("host CPUs: sched_getaffinity: %w", err)
	}
	for _, c := range cpus {
		if c < 0 || c >= len(have)*64 || !have.IsSet(c) {
			return fmt.Errorf("host CPUs: CPU %d is not one this process may run on (its affinity has %d CPUs; Host.CPUs, rungv run --host-cpus)", c, have.Count())
		}
		want.Set(c)
	}
	// Every thread: sched_setaffinity(2) sets one thread's mask, and
	// os/exec forks from whichever thread runs it.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("host CPUs: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &want); err != nil && err != unix.ESRCH {
			return fmt.Errorf("host CPUs: sched_setaffinity of thread %d: %w", tid, err)
		}
	}
	return nil
}
