//go:build !linux

package gvx

// treePriority has no effect off Linux: warm boots run at the pool's own
// priority (RefillDelay still keeps them behind the claims).
type treePriority struct{ nice, base int }

func newTreePriority(int) *treePriority { return nil }

type treeWalk struct{ members map[int]bool }

func (*treePriority) walk() *treeWalk { return &treeWalk{} }

func (*treeWalk) update(root int) {}

func (*treeWalk) set(boot bool, seen map[string]bool) (settled, grew bool, err error) {
	return true, false, nil
}
