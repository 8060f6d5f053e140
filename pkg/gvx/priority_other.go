//go:build !linux

package gvx

// treePriority has no effect off Linux (newTreePriority is nil): warm
// boots run at the pool's own priority, and RefillDelay still keeps them
// behind the claims.
type treePriority struct{}

func newTreePriority(int) *treePriority { return nil }

type treeWalk struct{}

func (*treePriority) walk() *treeWalk { return &treeWalk{} }

func (*treeWalk) update(root int) {}

func (*treeWalk) set(boot bool, seen map[string]bool) (settled, grew bool, err error) {
	return true, false, nil
}
