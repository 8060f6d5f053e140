package gvx

// Pid returns the process ID of the rungv process running the episode, or
// 0 before Run has started it. A supervisor that must find episodes a
// crashed predecessor left (rungv serve's state records) keeps it, with
// the process's start time, to tell the episode from a reused PID.
func (s *Sandbox) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
