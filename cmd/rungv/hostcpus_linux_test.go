package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/internal/hostcpu"
	"z.gfire.dev/gvx/internal/hostiletest"
)

// TestHostCPUsPinned: rungv run --host-cpus N leaves every host thread of
// the episode (rungv, the supervisor, init, the Sentry, its stubs, the
// gofer) allowed on CPU N only, the guest busy meanwhile, and the guest
// sees one CPU; a CPU the caller may not use is refused by name.
func TestHostCPUsPinned(t *testing.T) {
	have, err := hostcpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 2 {
		t.Skipf("needs 2 CPUs to tell a pinned episode from an unpinned one; this process may use %d", len(have))
	}
	cpu := have[len(have)-1]
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", "--network", "none", "--host-cpus", strconv.Itoa(cpu), imageRef,
			"sh", "-c", "echo started $(grep -c ^processor /proc/cpuinfo); while :; do :; done")
		line, _ := startLines(t, c)
		// gVisor counts the CPUs it may use when it boots: the guest
		// sees one.
		if s := line(); s != "started 1" {
			t.Fatalf("guest printed %q, want \"started 1\" (one CPU in its /proc/cpuinfo)", s)
		}
		want := strconv.Itoa(cpu)
		tasks := hostcpu.Tasks(hostiletest.Descendants(c.Process.Pid))
		for tid, got := range tasks {
			if got != want {
				t.Errorf("host task %d of the episode may run on CPUs %s, want %s only", tid, got, want)
			}
		}
		n := len(tasks)
		// rungv, supervisor, init, runsc's sandbox and gofer and their
		// threads, the guest's stub: dozens.
		if n < 10 {
			t.Errorf("checked only %d host tasks of the episode", n)
		}
		t.Logf("%d host tasks of the episode, all on CPU %d", n, cpu)
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
		checkClean(t, tmp)

		r := runRungv(t, u, tmp, "", "run", "--network", "none", "--host-cpus", "4095", imageRef, "true")
		if r.code == 0 || !strings.Contains(r.stderr, "CPU 4095") || !strings.Contains(r.stderr, "--host-cpus") {
			t.Errorf("--host-cpus 4095: exit %d, stderr %q; want a refusal naming the CPU and the flag", r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--host-cpus", "1-0", imageRef, "true")
		if r.code == 0 || !strings.Contains(r.stderr, "--host-cpus") {
			t.Errorf("--host-cpus 1-0: exit %d, stderr %q; want a usage error naming the flag", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
