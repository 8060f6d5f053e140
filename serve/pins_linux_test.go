package serve_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				out[pid] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// TestPinCPUs: with Config.PinCPUs each episode runs on one host CPU, the
// least used by the server's live episodes, and gives it back when it
// ends.
func TestPinCPUs(t *testing.T) {
	need(t)
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for c := 0; c < len(have)*64; c++ {
		if have.IsSet(c) {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	if len(cpus) < 2 {
		t.Skipf("needs 2 CPUs; this process may use %d", len(cpus))
	}
	_, a := startServer(t, serve.Config{PinCPUs: true})
	// create returns a new episode and the CPU its rungv may run on.
	create := func() (string, string) {
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
