package main

import (
	"strings"
	"testing"
)

// TestFutexSharedWakeNotLost: a shared (not FUTEX_PRIVATE) futex wake
// between two guest processes is not lost, in the protocol of gVisor's
// systrap stub and its Sentry (testdata/futexshared: A advances a word and
// wakes B, B replies and wakes A until one waiter is woken, with signals
// and spinning threads racing the waits), on a memfd page both map
// MAP_SHARED at different addresses and on a MAP_SHARED|MAP_ANONYMOUS page
// inherited over fork, in both isolation modes. Every wake FUTEX_WAKE
// counted must end a FUTEX_WAIT with 0. Without the sys_futex.go half of
// gVisor patch 0011-nested-lost-wake a wait that is woken and interrupted
// at once is restarted and the wake it was counted for is lost (a few
// wakes in a hundred here: "B->A wakes 300, A woken 269"); what PostgreSQL,
// Python multiprocessing or process-shared pthread mutexes would hang on
// in an episode, as an inner Sentry's stub did nested.
func TestFutexSharedWakeNotLost(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0011-nested-lost-wake")
	bin := guestProgramBytes(t, "futexshared")
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, string(bin), "run", "--rm", "--network", "none", "--isolation", iso, imageRef,
			"sh", "-c", "cat > /tmp/f && chmod +x /tmp/f && /tmp/f -n 500 && /tmp/f -n 500 -anon")
		out := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(out) != 2 || !strings.HasPrefix(out[0], "ok 500:") || !strings.HasPrefix(out[1], "ok 500:") {
			t.Fatalf("futexshared in the episode: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})
}
