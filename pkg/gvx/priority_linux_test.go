package gvx

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
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

// TestTreeWalkReusedParentPID: a member that ended, whose PID was taken
// by a host process before the walk looked again (a guest's own stubs
// make PIDs wrap around fast where pid_max is 32768), is not the parent
// of that process's children: as root the pool reniced the session of
// whatever host process got the PID, through its children. The PID is
// reused for real (ns_last_pid, as CRIU does), so root only.
func TestTreeWalkReusedParentPID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("reusing a PID on purpose (ns_last_pid) needs root")
	}
	own, ownNice, err := autogroup(os.Getpid())
	if err != nil {
		t.Skipf("no autogroups on this kernel: %v", err)
	}
	tp := newTreePriority(ownNice + 5)
	if tp == nil {
		t.Skip("this process's autogroup already runs at a high nice")
	}
	w := tp.walk()
	// The episode: root runs one short child (the member that ends), reaps
	// it, and stays.
	root := startSession(t, "sleep 0.5 & wait; exec sleep 60")
	member := waitChild(t, root)
	w.update(root)
	if !w.members[member] {
		t.Fatalf("the walk missed member %d of %d", member, root)
	}
	for procExists(member) {
		time.Sleep(10 * time.Millisecond)
	}
	// A host process (a session of its own: another autogroup) takes the
	// PID, and starts a child, before the walk's next pass.
	var host int
	for try := 0; ; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(member-1)), 0); err != nil {
			t.Skipf("ns_last_pid: %v", err)
		}
		if host = startSession(t, "sleep 60 & wait"); host == member {
			break
		}
		if try == 50 {
			t.Skipf("PID %d was taken by other processes 50 times", member)
		}
	}
	child := waitChild(t, host)
	g, before, err := autogroup(child)
	if err != nil || g == own {
		t.Fatalf("the host process's child %d: autogroup %q (own %q): %v", child, g, own, err)
	}
	if w.before[child] {
		t.Skipf("PID %d (the host process's child) named another process when the walk began, which the walk never looks at", child)
	}
	w.update(root)
	if _, _, err := w.set(true, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := autogroup(child); n != before {
		t.Errorf("the host session that took member %d's PID is at nice %d, was %d: the walk took its child %d for the episode's", member, n, before, child)
	}
	if w.members[child] {
		t.Errorf("the host process's child %d is a member after its parent took member %d's PID", child, member)
	}
	if _, n, _ := autogroup(root); n != ownNice+5 {
		t.Errorf("the episode's own autogroup is at nice %d, want %d", n, ownNice+5)
	}
}

// startSession starts sh -c script in a session of its own (killed when
// the test ends) and returns its PID.
func startSession(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// waitChild waits for pid's first child and returns it.
func waitChild(t *testing.T, pid int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, p := range procPIDs() {
			if pp, _ := procStat(p); pp == pid {
				return p
			}
		}
	}
	t.Fatalf("process %d started no child in 10 s", pid)
	return 0
}

func procExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
