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

// Memory returns what the episode's processes (rungv and everything below
// it: the Sentry, the gofer, systrap's stubs) hold now, in bytes: their
// proportional set size when the host lets this process read it (root,
// or the same user with ptrace access), with pss true; otherwise their
// resident set size, which counts pages they share more than once. -1
// before Run has started rungv, after it exited, or off Linux.
func (s *Sandbox) Memory() (bytes int64, pss bool) { return treeMemory(s.Pid()) }
