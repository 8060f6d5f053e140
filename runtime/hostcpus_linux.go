package runtime

import (
	"fmt"

	"z.gfire.dev/gvx/internal/hostcpu"
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
	if err := hostcpu.Pin(cpus); err != nil {
		return fmt.Errorf("host CPUs (Host.CPUs, rungv run --host-cpus): %w", err)
	}
	return nil
}
