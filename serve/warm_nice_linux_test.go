package serve_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/serve"
)

// autogroupNice reads /proc/PID/autogroup: the group's name and nice.
func autogroupNice(pid int) (string, int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 3 {
		return "", 0, false
	}
	n, err := strconv.Atoi(f[2])
	return f[0], n, err == nil
}

// descendantGroups is the nice of every autogroup of this process's
// descendants (the server's episodes: rungv and everything below it)
// other than this process's own, by name.
func descendantGroups() map[string]int {
	own, _, _ := autogroupNice(os.Getpid())
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		i := strings.LastIndexByte(string(b), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	groups := map[string]int{}
	for pid := range parent {
		for a := parent[pid]; a > 1; a = parent[a] {
			if a == os.Getpid() {
				if g, n, ok := autogroupNice(pid); ok && g != own {
					groups[g] = n
				}
				break
			}
		}
	}
	return groups
}

func allNice(groups map[string]int, n int) bool {
	for _, v := range groups {
		if v != n {
			return false
		}
	}
	return len(groups) > 0
}

// TestWarmRefillNice: a warm boot runs at Config.RefillNice (every
// autogroup its processes have then), at most for a second when it is slow to be
// ready (here a Docker port nothing answers, so it never is), and a warm
// episode that was ready is claimed with every autogroup back at the
// server's nice. Without BootNiced no boot is ever seen niced; without its
// bound the slow boot stays niced; without the restore before the ready
// list the claimed one is.
func TestWarmRefillNice(t *testing.T) {
	need(t)
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		t.Skipf("no autogroups on this kernel: %v", err)
	}
	const nice = 17
	_, base, _ := autogroupNice(os.Getpid())
	if base >= nice {
		t.Skipf("this test runs at nice %d already", base)
	}
	req := func(js string) serve.CreateRequest {
		var r serve.CreateRequest
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("slow boot", func(t *testing.T) {
		slow := req(fmt.Sprintf(`{"spec": {"image": %q, "args": ["sleep", "600"]}, "docker": true}`, env.ImageRef))
		_, _ = startServer(t, serve.Config{RefillNice: nice, ReadyTimeout: 20 * time.Second,
			Warm: []serve.WarmSpec{{Count: 1, Request: slow}}})
		var niced map[string]int
		t0 := time.Now()
		for ; time.Since(t0) < 10*time.Second && niced == nil; time.Sleep(5 * time.Millisecond) {
			// Every autogroup there is at that moment: on a loaded host the
			// Sentry's may come after the second's bound (the pool's test,
			// which can lift the bound, checks that all of them get it).
			if g := descendantGroups(); allNice(g, nice) {
				niced = g
			}
		}
		if niced == nil {
			t.Fatalf("the warm boot's autogroups were never all at nice %d: %v", nice, descendantGroups())
		}
		t.Logf("booting at nice %d after %v: %v", nice, time.Since(t0), niced)
		var back map[string]int
		for t1 := time.Now(); time.Since(t1) < 8*time.Second && back == nil; time.Sleep(20 * time.Millisecond) {
			if g := descendantGroups(); allNice(g, base) {
				back = g
			}
		}
		if back == nil {
			t.Fatalf("a boot not ready after a second still runs niced: %v (want all at %d)", descendantGroups(), base)
		}
		t.Logf("back at nice %d %v after the start", base, time.Since(t0))
	})

	t.Run("claimed", func(t *testing.T) {
		js := fmt.Sprintf(`{"spec": {"image": %q}}`, env.ImageRef)
		_, a := startServer(t, serve.Config{RefillNice: nice, RefillDelay: time.Hour,
			Warm: []serve.WarmSpec{{Count: 1, Request: req(js)}}})
		a.waitMetric("gvx_serve_warm_ready", 1)
		var r map[string]any
		json.Unmarshal([]byte(js), &r)
		in := a.create(r)
		if !in.Warm {
			t.Fatalf("not a warm claim: %+v", in)
		}
		// RefillDelay holds the replacement back: every descendant is the
		// claimed episode's.
		if g := descendantGroups(); !allNice(g, base) {
			t.Errorf("the claimed episode's autogroups are not at the server's nice %d: %v", base, g)
		}
	})
}
