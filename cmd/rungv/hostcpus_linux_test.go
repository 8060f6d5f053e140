package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHostCPUsPinned: rungv run --host-cpus N leaves every host thread of
// the episode (rungv, the supervisor, init, the Sentry, its stubs, the
// gofer) allowed on CPU N only, the guest busy meanwhile; a CPU the caller
// may not use is refused by name.
func TestHostCPUsPinned(t *testing.T) {
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		t.Fatal(err)
	}
	if have.Count() < 2 {
		t.Skipf("needs 2 CPUs to tell a pinned episode from an unpinned one; this process may use %d", have.Count())
	}
	cpu := -1
	for c := 0; c < len(have)*64; c++ {
		if have.IsSet(c) {
			cpu = c // the last one
		}
	}
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", "--network", "none", "--host-cpus", strconv.Itoa(cpu), imageRef,
			"sh", "-c", "echo started; while :; do :; done")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		kids := map[int][]int{}
		for p, pp := range parents() {
			kids[pp] = append(kids[pp], p)
		}
		want := strconv.Itoa(cpu)
		n := 0
		for todo := []int{c.Process.Pid}; len(todo) > 0; {
			p := todo[len(todo)-1]
			todo = append(todo[:len(todo)-1], kids[p]...)
			tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p), "task"))
			for _, task := range tasks {
				st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "task", task.Name(), "status"))
				if err != nil {
					continue // ended meanwhile
				}
				for _, l := range strings.Split(string(st), "\n") {
					if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
						n++
						if got := strings.TrimSpace(v); got != want {
							t.Errorf("task %s of pid %d may run on CPUs %s, want %s only", task.Name(), p, got, want)
						}
					}
				}
			}
		}
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
