package gvx

import (
	"errors"

	"z.gfire.dev/gvx/internal/hostcpu"
)

// SetHostCPUs moves the running episode's host processes (rungv and
// everything below it: the Sentry, its stubs, the gofer) onto the host
// CPUs cpus, or onto all the host allows where cpus is empty; threads and
// processes they make later inherit it. Config.HostCPUs does this from
// the start, and then the guest sees that many CPUs too (gVisor counts
// the CPUs it may use when it boots); a move later leaves the guest's
// count as it booted. An error before Run has started rungv or after it
// has ended.
func (s *Sandbox) SetHostCPUs(cpus []int) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("gvx: SetHostCPUs: the episode has not started")
	}
	select {
	case <-exited: // rungv was reaped: its PID may name another process
		return errors.New("gvx: SetHostCPUs: the episode has ended")
	default:
	}
	pid := cmd.Process.Pid
	return hostcpu.PinProcesses(func() []int { return descendants(pid) }, cpus)
}
