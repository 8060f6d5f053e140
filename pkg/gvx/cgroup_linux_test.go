package gvx_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// Issue 26, item 3: every host cgroup an episode makes is recorded before
// it exists, and removed by a graceful close, by the supervisor, or by the
// next start after a kill — in every isolation mode, forkable episodes
// included; a record cannot make rungv remove anything else; rungv gc
// lists and removes what dead episodes left.

// cgroupMountPoints are the roots of every cgroup v1 hierarchy and of the
// cgroup v2 one.
func cgroupMountPoints(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if ok && len(pf) >= 5 && len(qf) >= 1 && pf[3] == "/" && (qf[0] == "cgroup" || qf[0] == "cgroup2") {
			out = append(out, pf[4])
		}
	}
	return out
}

// pidsMount is the pids v1 hierarchy's root, or the v2 mount.
func pidsMount(t *testing.T) string {
	t.Helper()
	for _, m := range cgroupMountPoints(t) {
		if filepath.Base(m) == "pids" {
			return m
		}
	}
	for _, m := range cgroupMountPoints(t) {
		if b, err := os.ReadFile(filepath.Join(m, "cgroup.controllers")); err == nil && strings.Contains(string(b), "pids") {
			return m
		}
	}
	return ""
}

// needCgroups skips unless this process may make cgroups (root, with a
// writable cgroup hierarchy): what -m/--cpus need to be enforced.
func needCgroups(t *testing.T) {
	t.Helper()
	need(t)
	if os.Getuid() != 0 {
		t.Skip("not root: rungv makes host cgroups only as root (or in a delegated v2 subtree)")
	}
	m := pidsMount(t)
	if m == "" {
		t.Skip("no pids cgroup hierarchy mounted")
	}
	probe := filepath.Join(m, "gvx-testprobe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("no writable cgroup hierarchy: %v", err)
	}
	os.Remove(probe)
}

// episodeCgroups are the directories named gvx-ID under every cgroup
// mount.
func episodeCgroups(t *testing.T, id string) []string {
	t.Helper()
	var found []string
	for _, m := range cgroupMountPoints(t) {
		_ = filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, m), "/") > 6 {
				return filepath.SkipDir
			}
			if d.Name() == "gvx-"+id {
				found = append(found, p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return found
}

// episodeIn waits for the one episode state directory in tmp and returns
// its ID.
func episodeIn(t *testing.T, tmp string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(tmp, "rungv-*"))
		if len(m) == 1 {
			return strings.TrimPrefix(filepath.Base(m[0]), "rungv-")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single episode state directory in %s: %v", tmp, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCgroups waits until episode id has its cgroups (the guest runs).
func waitCgroups(t *testing.T, id string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if cgs := episodeCgroups(t, id); len(cgs) > 0 {
			return cgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("episode %s made no host cgroup", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nextStart is the next episode's start in tmp: one whose image does not
// exist, so it fails right after its sweep of dead episodes.
func nextStart(t *testing.T, tmp string) {
	t.Helper()
	cmd := exec.Command(rungvBin, "run", "--isolation", "seccomp-only", "--network", "none", "oci:"+filepath.Join(tmp, "no-such-image"), "true")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no-such-image") {
		t.Fatalf("next start: %v, %s; want the missing image's error", err, out)
	}
}

// sweptByNextStarts starts episodes (nextStart) until episode id's
// cgroups are gone, for at most 30 s, and returns those left. A sweep
// waits sweepCgroupWait (2 s) for a killed episode's dying tasks and keeps
// the record while one is busy, for the start after it: under CI's load
// the sandbox's tasks have taken longer than that to die, and the next
// start but one removed the cgroups.
func sweptByNextStarts(t *testing.T, tmp, id string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := 1; ; n++ {
		nextStart(t, tmp)
		left := episodeCgroups(t, id)
		if len(left) == 0 || time.Now().After(deadline) {
			if n > 1 {
				t.Logf("episode %s's cgroups went at start %d", id, n)
			}
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// resisting is a guest that ignores SIGTERM, says "up", and sleeps.
var resisting = []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"}

// limited is the seccomp-only spec of guest with -m, --cpus and pids.
func limited(args []string) *spec.Spec {
	return &spec.Spec{
		Version: spec.Version, Image: imageRef, Network: spec.NetworkNone, Isolation: spec.IsolationSeccompOnly,
		Entrypoint: args[:1], Args: args[1:],
		Limits: spec.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 512},
	}
}

// rungvChildren are the PIDs of the rungv processes whose parent is ppid.
func rungvChildren(ppid int) []int {
	var pids []int
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
		i := strings.LastIndexByte(string(st), ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) || f[0] == "Z" {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.HasPrefix(exe, rungvBin) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestKilledEpisodeCgroupsSwept: rungv run with -m, --cpus and a pids
// limit, killed with SIGKILL (with its supervisor, in the namespaces
// mode), leaves no gvx-ID cgroup under any cgroup mount once the next
// episode has started. Seccomp-only episodes wrote no record at all.
func TestKilledEpisodeCgroupsSwept(t *testing.T) {
	needCgroups(t)
	for _, iso := range []string{"seccomp-only", "namespaces"} {
		t.Run(iso, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(rungvBin, "run", "--isolation", iso, "--network", "none", "-m", "256m", "--cpus", "1", "--pids-limit", "512", imageRef, "sh", "-c", "echo up; exec sleep 1000")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			if l, err := bufio.NewReader(out).ReadString('\n'); l != "up\n" {
				t.Fatalf("guest did not start: %q %v", l, err)
			}
			id := episodeIn(t, tmp)
			cgs := waitCgroups(t, id)
			t.Logf("episode %s: %v", id, cgs)
			for _, pid := range rungvChildren(cmd.Process.Pid) { // the supervisor, if any
				if iso == "namespaces" {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if left := sweptByNextStarts(t, tmp, id); len(left) > 0 {
				t.Fatalf("after a kill -9 and the next starts, episode %s's cgroups are left: %v", id, left)
			}
		})
	}
}

// TestKilledForkableCgroupsSwept: the same for a forkable episode (one
// prepared with EnableCheckpoint), its rungv SIGKILLed under the SDK.
func TestKilledForkableCgroupsSwept(t *testing.T) {
	needCgroups(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx := context.Background()
	out := newOutput()
	sb, err := gvx.NewFromSpec(ctx, limited(resisting), gvx.Config{Rungv: rungvBin, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.EnableCheckpoint(filepath.Join(tmp, "ck")); err != nil {
		t.Fatal(err)
	}
	e := startEpisode(t, ctx, sb, nil, out)
	out.waitFor(t, `up\n`)
	id := episodeIn(t, tmp)
	waitCgroups(t, id)
	kids := rungvChildren(os.Getpid())
	if len(kids) != 1 {
		t.Fatalf("want one rungv child of the test, have %v", kids)
	}
	_ = syscall.Kill(kids[0], syscall.SIGKILL)
	<-e.done
	if left := sweptByNextStarts(t, tmp, id); len(left) > 0 {
		t.Fatalf("after a kill -9 of a forkable episode and the next starts, its cgroups are left: %v", left)
	}
}

// TestCloseRemovesCgroups: the SDK's Close of a seccomp-only and of a
// forkable episode — whose guest ignores SIGTERM — leaves no cgroup: rungv
// gets SIGTERM, not SIGKILL, and tears the episode down at once.
func TestCloseRemovesCgroups(t *testing.T) {
	needCgroups(t)
	for _, forkable := range []bool{false, true} {
		t.Run("forkable="+strconv.FormatBool(forkable), func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx := context.Background()
			out := newOutput()
			sb, err := gvx.NewFromSpec(ctx, limited(resisting), gvx.Config{Rungv: rungvBin, Stdout: out})
			if err != nil {
				t.Fatal(err)
			}
			if forkable {
				if err := sb.EnableCheckpoint(filepath.Join(tmp, "ck")); err != nil {
					t.Fatal(err)
				}
			}
			e := startEpisode(t, ctx, sb, nil, out)
			out.waitFor(t, `up\n`)
			id := episodeIn(t, tmp)
			waitCgroups(t, id)
			if err := sb.Close(); err != nil {
				t.Fatal(err)
			}
			<-e.done
			if left := episodeCgroups(t, id); len(left) > 0 {
				t.Fatalf("after Close, episode %s's cgroups are left: %v", id, left)
			}
			if m, _ := filepath.Glob(filepath.Join(tmp, "rungv-*")); len(m) > 0 {
				t.Fatalf("after Close, state directories are left: %v", m)
			}
		})
	}
}

// newID is a random episode ID.
func newID(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// plantDead makes a dead episode's state directory for id in tmp (its
// lock unheld) recording cgroups, and returns it.
func plantDead(t *testing.T, tmp, id string, cgroups []string) string {
	t.Helper()
	dir := filepath.Join(tmp, "rungv-"+id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cgroups)
	if err := os.WriteFile(filepath.Join(dir, "cgroups.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mkCgroup makes the empty cgroup dir, removed at the end of the test.
func mkCgroup(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

// TestCraftedCgroupRecordIgnored: a dead episode's cgroups.json (a user's
// own file: a test stands in for whoever wrote it) naming a cgroup not of
// that episode, a directory outside every cgroup mount, or reached through
// a symlinked record makes the sweep remove none of them.
func TestCraftedCgroupRecordIgnored(t *testing.T) {
	needCgroups(t)
	tmp := t.TempDir()
	pids := pidsMount(t)
	id := newID(t)
	other := mkCgroup(t, filepath.Join(pids, "gvx-"+newID(t)))             // another episode's
	nonGvx := mkCgroup(t, filepath.Join(pids, "gvxtest-victim-"+newID(t))) // not rungv's at all
	outside := filepath.Join(t.TempDir(), "gvx-"+id)                       // named right, not a cgroup
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	dotdot := mkCgroup(t, filepath.Join(pids, "gvx-"+id))                             // named right, reached by ..
	plantDead(t, tmp, id, []string{other, nonGvx, outside, pids + "/x/../gvx-" + id}) // unclean: not filepath.Join
	// A dead episode whose record is a symlink to a list naming its own
	// (otherwise removable) cgroup.
	id2 := newID(t)
	own2 := mkCgroup(t, filepath.Join(pids, "gvx-"+id2))
	dir2 := plantDead(t, tmp, id2, nil)
	list := filepath.Join(t.TempDir(), "list.json")
	b, _ := json.Marshal([]string{own2})
	if err := os.WriteFile(list, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir2, "cgroups.json"))
	if err := os.Symlink(list, filepath.Join(dir2, "cgroups.json")); err != nil {
		t.Fatal(err)
	}
	nextStart(t, tmp)
	for _, d := range []string{other, nonGvx, outside, dotdot, own2} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed on a crafted record (ids %s, %s): %v", d, id, id2, err)
		}
	}
}

// gcReport is rungv gc --json's output.
type gcReport struct {
	DryRun  bool `json:"dry_run"`
	Entries []struct {
		Kind, Path, Episode, Error string
		Removed                    bool
	} `json:"entries"`
}

func runGC(t *testing.T, tmp string, args ...string) gcReport {
	t.Helper()
	cmd := exec.Command(rungvBin, append([]string{"gc", "--json", "--no-orphans"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rungv gc %v: %v %s", args, err, out)
	}
	var r gcReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("rungv gc %v: %v: %s", args, err, out)
	}
	return r
}

// TestGC: rungv gc --dry-run --json lists a planted dead episode (its
// state directory and recorded cgroup) and removes nothing; rungv gc
// removes them; a live episode's (its lock held) is neither listed nor
// touched.
func TestGC(t *testing.T) {
	needCgroups(t)
	tmp := t.TempDir()
	id := newID(t)
	cg := mkCgroup(t, filepath.Join(pidsMount(t), "gvx-"+id))
	dead := plantDead(t, tmp, id, []string{cg})
	liveID := newID(t)
	liveCg := mkCgroup(t, filepath.Join(pidsMount(t), "gvx-"+liveID))
	live := plantDead(t, tmp, liveID, []string{liveCg})
	lock, err := os.Open(filepath.Join(live, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	has := func(r gcReport, kind, path string) bool {
		for _, e := range r.Entries {
			if e.Kind == kind && e.Path == path {
				return true
			}
		}
		return false
	}
	r := runGC(t, tmp, "--dry-run")
	if !r.DryRun || !has(r, "state", dead) || !has(r, "cgroup", cg) {
		t.Fatalf("rungv gc --dry-run --json: %+v; want the dead state directory %s and its cgroup %s", r, dead, cg)
	}
	if has(r, "state", live) || has(r, "cgroup", liveCg) {
		t.Fatalf("rungv gc --dry-run lists a live episode's: %+v", r)
	}
	for _, p := range []string{dead, cg} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("--dry-run removed %s: %v", p, err)
		}
	}
	r = runGC(t, tmp)
	for _, e := range r.Entries {
		if (e.Path == dead || e.Path == cg) && !e.Removed {
			t.Fatalf("rungv gc did not remove %s: %+v", e.Path, e)
		}
	}
	for _, p := range []string{dead, cg} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("rungv gc left %s", p)
		}
	}
	for _, p := range []string{live, liveCg} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("rungv gc removed the live episode's %s: %v", p, err)
		}
	}
}

// TestGCOrphans: rungv gc removes an empty gvx-ID cgroup no record names
// once it is over a minute old, and leaves one with a process in it (a
// live episode's, whose lock it cannot see) and a young one (an episode's
// being made).
func TestGCOrphans(t *testing.T) {
	needCgroups(t)
	tmp := t.TempDir()
	pids := pidsMount(t)
	old := time.Now().Add(-2 * time.Minute)
	empty := mkCgroup(t, filepath.Join(pids, "gvx-"+newID(t)))
	busy := mkCgroup(t, filepath.Join(pids, "gvx-"+newID(t)))
	young := mkCgroup(t, filepath.Join(pids, "gvx-"+newID(t)))
	for _, d := range []string{empty, busy} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Skipf("cannot age a cgroup directory here: %v", err)
		}
	}
	sleeper := exec.Command("sleep", "1000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
		time.Sleep(50 * time.Millisecond)
		os.Remove(busy)
	}()
	if err := os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rungvBin, "gc", "--json")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.Output()
	var r gcReport
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("rungv gc --json: %v, %v: %s", err, jerr, out)
	}
	if _, err := os.Stat(empty); err == nil {
		t.Fatalf("rungv gc left the old empty orphan %s: %+v", empty, r)
	}
	for _, d := range []string{busy, young} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("rungv gc removed %s (a process in it, or made a moment ago): %v", d, err)
		}
	}
}
