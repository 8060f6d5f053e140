package main

import (
	"strings"
	"testing"
)

// TestFutexWakeNotLost: a guest's FUTEX_WAIT that a FUTEX_WAKE counted as
// woken ends, even when a signal reaches the waiter at the same moment
// (testdata/futexwake, 3000 times, in both isolation modes). Without
// gVisor patch 0011-nested-lost-wake the Sentry restarts such a wait and
// the wake is lost ("lost at N", within the first few dozen rounds here):
// what made about one nested inner episode in four never end, its Sentry
// waiting for a systrap stub's reply whose wake was lost.
func TestFutexWakeNotLost(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0011-nested-lost-wake")
	bin := guestProgramBytes(t, "futexwake")
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, string(bin), "run", "--rm", "--network", "none", "--isolation", iso, imageRef,
			"sh", "-c", "cat > /tmp/futexwake && chmod +x /tmp/futexwake && /tmp/futexwake 3000")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ok 3000" {
			t.Fatalf("futexwake in the episode: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})
}
