package gvx

import "time"

// ProcessTree is pid and every process below it (for the tests of
// gvx_test, which check what the pool did to an episode's processes).
var ProcessTree = descendants

// SetRefillNiceFor sets how long a warm boot runs niced, until the test
// ends.
func SetRefillNiceFor(t interface{ Cleanup(func()) }, d time.Duration) {
	old := refillNiceFor
	refillNiceFor = d
	t.Cleanup(func() { refillNiceFor = old })
}
