package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillAllLeavesNothingAfterNextStart kills rungv and its supervisor at
// once (as a job manager's cgroup kill or the OOM killer would), so nothing
// of the episode gets to clean up: the next start in the same TMPDIR must
// remove the state directory (with the episode's env in config.json), the
// published socket and, as root, the episode's host cgroup.
func TestKillAllLeavesNothingAfterNextStart(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		sock := filepath.Join(privateTmp(t, u), "ep.sock")
		c := command(t, u, tmp, "run", "--network", "none", "-m", "256m", "--limits", "best-effort", "-e", "SECRET_TOKEN=hunter2",
			"-p", "unix:"+sock+":2375", imageRef, "sh", "-c", "echo started; exec sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		sup := childMentioning(c.Process.Pid, "_gvx-supervise")
		if sup == 0 {
			t.Fatal("no supervisor found")
		}
		cgroups := episodeCgroups(t, c.Process.Pid)
		if u.name == "root" && len(cgroups) == 0 {
			t.Fatal("as root the episode has no host cgroup")
		}
		// Stopped first, so that neither can clean up after the other's
		// death before its own (under load the host side would otherwise
		// see the supervisor go and remove the socket).
		syscall.Kill(c.Process.Pid, syscall.SIGSTOP)
		syscall.Kill(sup, syscall.SIGSTOP)
		syscall.Kill(sup, syscall.SIGKILL)
		syscall.Kill(c.Process.Pid, syscall.SIGKILL)
		c.Wait()
		// Init dies with its supervisor, and the sandbox with init.
		deadline := time.Now().Add(10 * time.Second)
		for len(processesMentioning(tmp)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if p := processesMentioning(tmp); len(p) > 0 {
			t.Fatalf("processes outlived rungv and its supervisor: %v", p)
		}
		var left []string
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "rungv-") {
				left = append(left, e.Name())
			}
		}
		// Nothing of the episode could clean up: the test must see what the
		// next start has to sweep, or it proves nothing.
		if len(left) == 0 {
			t.Fatal("no state directory was left after killing rungv and its supervisor")
		}
		if _, err := os.Lstat(sock); err != nil {
			t.Fatalf("the published socket was not left behind either (%v): nothing to sweep", err)
		}
		if r := runRungv(t, u, tmp, "", "run", "--network", "none", imageRef, "true"); r.code != 0 {
			t.Fatalf("next start: exit %d, stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the next start: %v", sock, err)
		}
		for _, d := range cgroups {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("cgroup %s is still there after the next start", d)
			}
		}
	})
}

// childMentioning is a child of pid whose command line contains s, or 0.
func childMentioning(pid int, s string) int {
	for p, pp := range parents() {
		if pp != pid {
			continue
		}
		if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(cl, []byte(s)) {
			return p
		}
	}
	return 0
}

// parents maps every process to its parent, from /proc/PID/stat.
func parents() map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			out[p] = pp
		}
	}
	return out
}
