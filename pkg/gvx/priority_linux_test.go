package gvx

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestTreeWalkReusedPID: a walk writes a process's autogroup only while
// that PID is still the process it saw (the same start time): a member
// that ended and whose PID now names another process (as root, any on
// the host) is left alone.
func TestTreeWalkReusedPID(t *testing.T) {
	if _, _, err := autogroup(os.Getpid()); err != nil {
		t.Skipf("no autogroups on this kernel: %v", err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // an autogroup of its own
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	_, before, err := autogroup(pid)
	if err != nil {
		t.Fatal(err)
	}
	tp := newTreePriority(before + 5)
	if tp == nil {
		t.Skip("this process's autogroup already runs at a high nice")
	}
	pp, start := procStat(pid)
	if pp != os.Getpid() || start == 0 {
		t.Fatalf("procStat(%d) = %d, %d", pid, pp, start)
	}

	w := tp.walk()
	w.members[pid], w.parent[pid] = true, procID{pp, start + 1} // "another process"
	if _, _, err := w.set(true, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := autogroup(pid); n != before {
		t.Fatalf("the autogroup of a PID whose process changed was set to nice %d", n)
	}

	w.parent[pid] = procID{pp, start}
	if _, _, err := w.set(true, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := autogroup(pid); n != before+5 {
		t.Fatalf("the member's autogroup is at nice %d, want %d", n, before+5)
	}
}

// TestParseAutogroup: a process in no autogroup (init's tree that never
// called setsid, as a CI agent's may be) reads as empty, and a pool
// there still nices its boots against nice 0; anything else malformed
// is an error.
func TestParseAutogroup(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		nice int
		bad  bool
	}{
		{"/autogroup-31773 nice 0\n", "/autogroup-31773", 0, false},
		{"/autogroup-7 nice 19\n", "/autogroup-7", 19, false},
		{"", "", 0, false},
		{"\n", "", 0, false},
		{"/autogroup-7 nice x\n", "", 0, true},
		{"/autogroup-7 nice\n", "", 0, true},
		{"autogroup nice 3\n", "", 0, true},
	} {
		name, nice, err := parseAutogroup(1, []byte(c.in))
		if (err != nil) != c.bad || name != c.name || nice != c.nice {
			t.Errorf("parseAutogroup(%q) = %q, %d, %v", c.in, name, nice, err)
		}
	}
	if b, err := os.ReadFile("/proc/self/autogroup"); err == nil {
		own, nice, err := autogroup(os.Getpid())
		if err != nil {
			t.Fatalf("this process's autogroup %q: %v", b, err)
		}
		if tp := newTreePriority(19); nice < 19 && (tp == nil || tp.own != own || tp.ownNice != nice) {
			t.Fatalf("newTreePriority(19) in autogroup %q (nice %d) = %+v", own, nice, tp)
		}
	}
}
