package gvx

// BootNiced runs s's boot at a lower CPU priority, as a Pool's warm boots
// run at PoolConfig.RefillNice, for a caller that keeps episodes booted
// ahead of demand itself (the episode server does): call it before s.Run,
// with done closed once Run has returned. From then until restore is
// called, or for at most one second (what keeps a boot behind the claims
// it follows without starving it on a host whose claimed episodes keep
// the CPUs busy), the autogroups of rungv and every process below it run
// at nice n (1–19). restore puts them back at this process's own nice and
// returns once every one has it, or an error naming what refused: call it
// before the episode is handed to anyone, who must not get it niced. rungv
// then starts in a session of its own (its autogroup is the episode's).
//
// n outside 1–19, a caller already at nice n or lower, or a kernel without
// autogroups: no effect, and restore returns nil. See PoolConfig.RefillNice
// for where autogroups do not weigh.
func (s *Sandbox) BootNiced(n int, done <-chan struct{}) (restore func() error) {
	if n < 1 || n > 19 {
		return func() error { return nil }
	}
	tp := newTreePriority(n)
	if tp == nil {
		return func() error { return nil }
	}
	s.ownSession = true
	return tp.background(s, done, nil)
}
