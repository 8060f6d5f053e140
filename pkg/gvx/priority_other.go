//go:build !linux

package gvx

// treePriority has no effect off Linux: warm boots run at the pool's own
// priority (RefillDelay still keeps them behind the claims).
type treePriority struct{ nice, base int }

func newTreePriority(int) *treePriority { return nil }

func (*treePriority) set(pid int, boot bool) (settled bool, err error) { return true, nil }
