package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
)

// TestJSONEventsAndNewVolume: --json reports start, the volume rungv
// created for a missing file, and the guest's exit code; a bad image is
// an error event with status 125; --log-level rejects unknown levels.
func TestJSONEventsAndNewVolume(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := filepath.Join(privateTmp(t, u), "new.ext4")
		r := runRungv(t, u, tmp, "", "run", "--json", "--network", "none",
			"--mount", "type=volume,src="+vol+",dst=/data,size=128m", imageRef, "sh", "-c", "echo hi >/data/f; exit 4")
		if r.code != 4 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var evs []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("stderr line %q is not JSON: %v", l, err)
			}
			evs = append(evs, e)
		}
		if len(evs) != 3 || evs[0]["event"] != "volume-created" || evs[0]["path"] != vol || evs[0]["bytes"] != float64(128<<20) ||
			evs[1]["event"] != "start" || evs[2]["event"] != "exit" || evs[2]["exit_code"] != float64(4) {
			t.Fatalf("events %v", evs)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := v.Lstat("f"); err != nil || h.Size != 3 {
			t.Errorf("f in the new volume: %+v, %v", h, err)
		}
		v.Close()

		r = runRungv(t, u, tmp, "", "run", "--json", "oci:"+filepath.Join(tmp, "missing"), "true")
		if r.code != 125 || !strings.Contains(r.stderr, `"event":"error"`) {
			t.Fatalf("bad image: exit %d stderr %q", r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--log-level", "loud", imageRef, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "--log-level") {
			t.Fatalf("bad level: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// TestLimitsCgroup: -m and --cpus are enforced by the Sentry always, and
// as root also by a host cgroup the episode runs in (--json's start event
// says which). The cgroup holds the episode's processes, has the limits,
// and is gone after the episode, even when rungv is SIGKILLed.
func TestLimitsCgroup(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		args := []string{"run", "--json", "--network", "none", "-m", "256m", "--cpus", "1"}
		if u.name == "nobody" {
			// No cgroup may be made: refused unless the caller accepts
			// the Sentry's shaping alone.
			if r := runRungv(t, u, tmp, "", append(args, imageRef, "true")...); r.code != 125 || !strings.Contains(r.stderr, "--limits best-effort") {
				t.Logf("as nobody without --limits: exit %d, stderr %q (a delegated cgroup here?)", r.code, r.stderr)
			}
			args = append(args, "--limits", "best-effort")
		}
		c := command(t, u, tmp, append(args, imageRef, "sh", "-c", "echo up; sleep 30")...)
		er, ew, _ := os.Pipe()
		c.Stderr = ew
		line, _ := startLines(t, c)
		ew.Close()
		if line() != "up" {
			t.Fatal("guest did not start")
		}
		var start struct {
			Event, Limits string
			Enforcement   map[string]string
		}
		if err := json.NewDecoder(er).Decode(&start); err != nil || start.Event != "start" {
			t.Fatalf("start event: %+v %v", start, err)
		}
		var dirs []string
		if u.name == "root" {
			if !strings.Contains(start.Limits, "cgroup") {
				t.Fatalf("as root: limits %q, want a host cgroup too", start.Limits)
			}
			dirs = episodeCgroups(t, c.Process.Pid)
			if len(dirs) == 0 {
				t.Fatal("the supervisor is in no gvx- cgroup")
			}
			for _, d := range dirs {
				for file, want := range map[string]string{"memory.limit_in_bytes": "268435456", "memory.max": "268435456", "cpu.cfs_quota_us": "100000", "cpu.max": "100000 100000"} {
					if b, err := os.ReadFile(filepath.Join(d, file)); err == nil && strings.TrimSpace(string(b)) != want {
						t.Errorf("%s/%s = %q, want %q", d, file, b, want)
					}
				}
			}
			if start.Enforcement["memory"] != "cgroup v1" && start.Enforcement["memory"] != "cgroup v2" {
				t.Errorf("as root: enforcement %v, want memory by a cgroup", start.Enforcement)
			}
		} else if start.Limits != "sentry" {
			t.Logf("as nobody: limits %q (a delegated cgroup here)", start.Limits)
		} else if start.Enforcement["memory"] != "sentry only (best effort)" {
			t.Errorf("as nobody, best effort: enforcement %v", start.Enforcement)
		}
		if want := map[string]string{"root": "cgroup", "nobody": "rlimit"}[u.name]; !strings.Contains(start.Enforcement["pids"], want) {
			t.Errorf("enforcement %v: want pids by a %s", start.Enforcement, want)
		}
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		checkClean(t, tmp)
		deadline := time.Now().Add(10 * time.Second)
		for _, d := range dirs {
			for {
				if _, err := os.Stat(d); os.IsNotExist(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("cgroup %s left after the episode", d)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
}

// children lists the PIDs of pid's children. They are listed per thread,
// and Go starts them from any thread.
func children(pid int) []string {
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// episodeCgroups returns the host cgroup directories named gvx-* that the
// child of pid (rungv's supervisor) is in.
func episodeCgroups(t *testing.T, pid int) []string {
	t.Helper()
	kids := children(pid)
	if len(kids) == 0 {
		t.Fatalf("rungv (%d) has no child", pid)
	}
	b, err := os.ReadFile("/proc/" + kids[0] + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/gvx-") {
			continue
		}
		switch {
		case parts[1] == "":
			dirs = append(dirs, "/sys/fs/cgroup"+parts[2])
		default:
			for _, ctrl := range strings.Split(parts[1], ",") {
				if ctrl == "memory" || ctrl == "cpu" {
					dirs = append(dirs, "/sys/fs/cgroup/"+parts[1]+parts[2])
					break
				}
			}
		}
	}
	return dirs
}

// TestUsageAndVersion: a mistyped verb or flag is rungv's usage error
// (exit 2, pointing at --help), not runsc's; runsc's own verbs still reach
// runsc; --version names the gVisor version.
func TestUsageAndVersion(t *testing.T) {
	need(t, asNobody)
	tmp := privateTmp(t, asNobody)
	for _, args := range [][]string{{"bogus"}, {"--bogus"}, {"run", "--bogus", imageRef}, {"pool", "--bogus"}} {
		r := runRungv(t, asNobody, tmp, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--help") || strings.Contains(r.stderr, "Subcommands for") {
			t.Errorf("rungv %v: exit %d, stderr %q; want 2 and rungv's own usage error", args, r.code, r.stderr)
		}
	}
	if r := runRungv(t, asNobody, tmp, "", "--root="+filepath.Join(tmp, "runsc"), "list"); r.code != 0 || !strings.Contains(r.stdout, "STATUS") {
		t.Errorf("runsc list through rungv: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runRungv(t, asNobody, tmp, "", "--version"); r.code != 0 || !strings.Contains(r.stdout, "gvisor.dev/gvisor") {
		t.Errorf("rungv --version: exit %d, %q", r.code, r.stdout)
	}
	// Help fits a terminal: 80 columns.
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"pool", "--help"}} {
		r := runRungv(t, asNobody, tmp, "", args...)
		for _, l := range strings.Split(r.stdout, "\n") {
			if len([]rune(l)) > 80 {
				t.Errorf("rungv %v: a line of %d columns: %q", args, len([]rune(l)), l)
			}
		}
	}
}

// TestMissingExecutable: a command the image lacks exits 127 with
// Docker's words (`exec: "nope": executable file not found in $PATH`),
// in both isolation modes and with --json as an error event, instead of
// 125 and runsc's "error finding executable" inside a chain of its
// internals; a command the image has through a symlinked path still runs.
func TestMissingExecutable(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		for _, iso := range []string{"namespaces", "seccomp-only"} {
			r := runRungv(t, u, tmp, "", "run", "--isolation", iso, "--network", "none", imageRef, "nope")
			if r.code != 127 || !strings.Contains(r.stderr, `exec: "nope": executable file not found in $PATH`) {
				t.Errorf("%s: nope: exit %d, stderr %q; want 127 and Docker's words", iso, r.code, r.stderr)
			}
			r = runRungv(t, u, tmp, "", "run", "--isolation", iso, "--network", "none", imageRef, "/bin/nope", "x")
			if r.code != 127 || !strings.Contains(r.stderr, `exec: "/bin/nope": stat /bin/nope: no such file or directory`) {
				t.Errorf("%s: /bin/nope: exit %d, stderr %q; want 127", iso, r.code, r.stderr)
			}
		}
		r := runRungv(t, u, tmp, "", "run", "--json", "--network", "none", imageRef, "nope")
		if r.code != 127 || !strings.Contains(r.stderr, `"event":"error"`) || !strings.Contains(r.stderr, "executable file not found") {
			t.Errorf("--json: exit %d, stderr %q; want 127 and an error event", r.code, r.stderr)
		}
		if r := runRungv(t, u, tmp, "", "run", "--network", "none", imageRef, "/bin/../bin/sh", "-c", "exit 3"); r.code != 3 {
			t.Errorf("/bin/../bin/sh: exit %d, stderr %q; want the guest's 3", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
