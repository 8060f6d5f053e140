package serve_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"z.gfire.dev/gvx/internal/hostcpu"
	"z.gfire.dev/gvx/internal/hostiletest"
	"z.gfire.dev/gvx/serve"
)

// rungvKids maps this process's rungv children (the episodes' rungv run)
// to the CPUs each may run on (Cpus_allowed_list).
func rungvKids(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) || f[0] == "Z" {
			continue
		}
		if exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); exe != env.Rungv {
			continue
		}
		if l, err := hostcpu.StatusList(filepath.Join("/proc", e.Name(), "status")); err == nil {
			out[pid] = l
		}
	}
	return out
}

// ownCPUs is this process's Cpus_allowed_list: an unpinned rungv's.
func ownCPUs(t *testing.T) string {
	t.Helper()
	l, err := hostcpu.StatusList("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// hostCPUList is the CPUs this process may use, as /proc lists them.
func hostCPUList(t *testing.T) []string {
	t.Helper()
	have, err := hostcpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for _, c := range have {
		cpus = append(cpus, strconv.Itoa(c))
	}
	return cpus
}

// newEpisodeCPUs returns a function that creates an episode on a and
// returns its ID and the CPUs its rungv may run on (Cpus_allowed_list).
func newEpisodeCPUs(t *testing.T, a *api) func() (string, string) {
	return func() (string, string) {
		before := rungvKids(t)
		in := a.create(map[string]any{"spec": busybox()})
		var got []string
		for pid, l := range rungvKids(t) {
			if _, old := before[pid]; !old {
				got = append(got, l)
			}
		}
		if len(got) != 1 {
			t.Fatalf("episode %s: new rungv processes' CPUs %v, want one", in.ID, got)
		}
		return in.ID, got[0]
	}
}

// TestPinCPUs: with PinAlways each episode runs on one host CPU, the
// least used by the server's live episodes, and gives it back when it
// ends.
func TestPinCPUs(t *testing.T) {
	need(t)
	cpus := hostCPUList(t)
	if len(cpus) < 2 {
		t.Skipf("needs 2 CPUs; this process may use %d", len(cpus))
	}
	_, a := startServer(t, serve.Config{PinCPUs: serve.PinAlways})
	create := newEpisodeCPUs(t, a)
	id0, c0 := create()
	id1, c1 := create()
	if c0 != cpus[0] || c1 != cpus[1] {
		t.Errorf("two episodes on CPUs %s and %s, want %s and %s (one each, lowest first)", c0, c1, cpus[0], cpus[1])
	}
	a.do("DELETE", "/v1/episodes/"+id1, nil, nil)
	_, c2 := create()
	if c2 != cpus[1] {
		t.Errorf("after the episode on CPU %s ended, the next went to CPU %s, want %s again", cpus[1], c2, cpus[1])
	}
	a.do("DELETE", "/v1/episodes/"+id0, nil, nil)
}

// TestPinPacked: by default (PinPacked) the episodes run on every CPU the
// server may use until they are as many as those CPUs; the one that
// fills the node is pinned, and so are the running ones, their whole
// process trees moved (rungv, the Sentry, its stubs, the gofer). Once the
// node is emptier again a new episode runs on all CPUs.
func TestPinPacked(t *testing.T) {
	need(t)
	cpus := hostCPUList(t)
	if len(cpus) < 2 || len(cpus) > 4 {
		t.Skipf("needs 2 to 4 CPUs (as many episodes at once); this process may use %d", len(cpus))
	}
	all := ownCPUs(t)
	_, a := startServer(t, serve.Config{})
	create := newEpisodeCPUs(t, a)
	var ids []string
	var pids []int
	for range len(cpus) - 1 {
		before := rungvKids(t)
		id, c := create()
		if c != all {
			t.Errorf("episode %d of %d CPUs: on CPUs %s, want all of them (%s)", len(ids)+1, len(cpus), c, all)
		}
		for pid := range rungvKids(t) {
			if _, old := before[pid]; !old {
				pids = append(pids, pid)
			}
		}
		ids = append(ids, id)
	}
	idA, cA := create() // the node is full from here on
	want := cpus[len(cpus)-1]
	if cA != want {
		t.Errorf("the episode that filled the node: on CPUs %s, want %s (the earlier ones took the others)", cA, want)
	}
	for i, pid := range pids {
		// Moved: every task of rungv and of every process below it.
		tasks := hostcpu.Tasks(hostiletest.Descendants(pid))
		for tid, got := range tasks {
			if got != cpus[i] {
				t.Errorf("episode %s, host task %d: on CPUs %s, want %s (moved when the node filled)", ids[i], tid, got, cpus[i])
			}
		}
		if len(tasks) < 10 {
			t.Errorf("episode %s: checked only %d host tasks", ids[i], len(tasks))
		}
	}
	a.do("DELETE", "/v1/episodes/"+idA, nil, nil)
	a.do("DELETE", "/v1/episodes/"+ids[0], nil, nil)
	if _, c := create(); c != all {
		t.Errorf("once fewer episodes than CPUs are live again: on CPUs %s, want all (%s)", c, all)
	}
}
