package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// treeTasks counts the host tasks (threads included) of pid and all its
// descendants: rungv, the supervisor, init, runsc, the sandbox, its
// systrap stubs (which have no command line) and the gofer.
func treeTasks(pid int) int {
	kids := map[int][]int{}
	for p, pp := range parents() {
		kids[pp] = append(kids[pp], p)
	}
	n := 0
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], kids[p]...)
		tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p), "task"))
		n += len(tasks)
	}
	return n
}

// TestForkBombBounded runs a guest fork bomb: the episode's host tasks
// stay within --pids-limit (before, ~24,000 host processes), the episode
// ends by itself, and nothing is left.
func TestForkBombBounded(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		const limit = 600
		c := command(t, u, tmp, "run", "--network", "none", "--pids-limit", fmt.Sprint(limit), imageRef,
			"sh", "-c", "echo started; b() { b | b & }; b; sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		peak := 0
		deadline := time.After(2 * time.Minute)
	watch:
		for {
			select {
			case <-done:
				break watch
			case <-deadline:
				t.Fatal("the fork bomb's episode did not end within 2 minutes")
			case <-time.After(20 * time.Millisecond):
				if n := treeTasks(c.Process.Pid); n > peak {
					peak = n
				}
			}
		}
		t.Logf("peak host tasks of the episode: %d (limit %d)", peak, limit)
		// rungv's own threads and the supervisor's made before the limit
		// took effect come on top of it.
		if peak > limit+64 {
			t.Errorf("the episode had %d host tasks, over --pids-limit %d", peak, limit)
		}
		checkClean(t, tmp)
	})
}

// TestMemoryHogBounded: as root, -m 256m is a host cgroup, so a guest that
// fills 1 GiB of its in-memory root filesystem cannot take it from the
// host: the write fails or the episode is stopped, and the cgroup's peak
// stays at the limit. (As a user who may make no cgroup, -m is refused
// without --limits best-effort: TestLimitsCgroup.)
func TestMemoryHogBounded(t *testing.T) {
	need(t, asRoot)
	tmp := privateTmp(t, asRoot)
	c := command(t, asRoot, tmp, "run", "--network", "none", "-m", "256m", imageRef,
		"sh", "-c", "echo started; dd if=/dev/zero of=/tmp/hog bs=1M count=1024 2>/dev/null && echo wrote-1g; sleep 2")
	pr, pw, _ := os.Pipe()
	c.Stdout = pw
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	out := bufio.NewReader(pr)
	if s, _ := out.ReadString('\n'); s != "started\n" {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("guest did not start: %q", s)
	}
	dirs := episodeCgroups(t, c.Process.Pid)
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(out)
		rest <- string(b)
	}()
	var seen int64
	for exited := false; !exited; {
		select {
		case s := <-rest:
			if strings.Contains(s, "wrote-1g") {
				t.Errorf("the guest wrote 1 GiB into memory under -m 256m")
			}
			exited = true
		case <-time.After(20 * time.Millisecond):
		}
		for _, d := range dirs {
			for _, f := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
				if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
					var n int64
					fmt.Sscan(string(b), &n)
					if n > seen {
						seen = n
					}
				}
			}
		}
	}
	c.Wait()
	t.Logf("cgroup peak %d MiB", seen>>20)
	// The kernel charges a few pages past memory.max where it must (an
	// OOM victim's exit, __GFP_NOFAIL allocations): seen in CI as 256 MiB
	// + 4 KiB. What the test guards is the 1 GiB the guest asked for.
	if seen > 256<<20+4<<20 {
		t.Errorf("the episode's cgroup peaked at %d bytes, over 256 MiB (+4 MiB the kernel may force-charge)", seen)
	}
	checkClean(t, tmp)
}
