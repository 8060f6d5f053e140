package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostiletest"
)

// TestKillAllLeavesNothingAfterNextStart kills rungv and its supervisor at
// once (as a job manager's cgroup kill or the OOM killer would), so nothing
// of the episode gets to clean up: the next start in the same TMPDIR must
// remove the state directory (with the episode's env in config.json), the
// published socket and, as root, the episode's host cgroup.
func TestKillAllLeavesNothingAfterNextStart(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
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

// TestHostUnmountNotPinned: a filesystem the host mounted (below a shared
// mount, as systemd hosts have them) before an episode started, and
// unmounts while it runs, is gone from every mount namespace at once: its
// loop device is detached, so its superblock is written back. The
// episode's init made its copy of the host's mount tree private, so the
// host's unmount did not reach it and the filesystem stayed mounted there
// until the episode ended; init's mounts are slaves now (as runsc makes
// the sandbox's and the gofer's). Where the host's own mounts are private
// (this VM, a container) no copy can follow an unmount: docs/runtime.md.
func TestHostUnmountNotPinned(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to loop-mount (CI runs as root)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	both(t, func(t *testing.T, u user) {
		dir := t.TempDir()
		img, top := filepath.Join(dir, "host.img"), filepath.Join(dir, "shared")
		mnt := filepath.Join(top, "mnt")
		if out, err := exec.Command("mkfs.ext4", "-q", img, "16M").CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v %s", err, out)
		}
		if err := os.Mkdir(top, 0o755); err != nil {
			t.Fatal(err)
		}
		hostMount(t, "--bind", top, top)
		hostMount(t, "--make-shared", top)
		t.Cleanup(func() { exec.Command("umount", "-l", top).Run() })
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		hostMount(t, "-o", "loop", img, mnt)
		mounted := true
		t.Cleanup(func() {
			if mounted {
				exec.Command("umount", "-l", mnt).Run()
			}
		})
		backing := loopBacking(t, mnt)

		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", "--network", "none", imageRef, "sh", "-c", "echo started; exec sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Fatalf("host umount: %v %s", err, out)
		}
		mounted = false
		deadline := time.Now().Add(10 * time.Second)
		for {
			holders := mountHolders(mnt)
			_, err := os.Stat(backing)
			if len(holders) == 0 && os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("10 s after the host unmounted %s, processes still have it mounted: %v (loop device still attached: %v)", mnt, holders, err == nil)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if c.ProcessState != nil || syscall.Kill(c.Process.Pid, 0) != nil {
			t.Fatal("the episode ended")
		}
	})
}

func hostMount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %v: %v %s", args, err, out)
	}
}

// loopBacking is the sysfs file naming the backing file of the loop
// device mounted at mnt (it goes when the device is detached).
func loopBacking(t *testing.T, mnt string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == mnt {
			p := "/sys/dev/block/" + f[2] + "/loop/backing_file"
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("%s is not a loop device's mount: %v", mnt, err)
			}
			return p
		}
	}
	t.Fatalf("%s is not mounted", mnt)
	return ""
}

// mountHolders lists the processes whose mount namespace has a mount at mnt.
func mountHolders(mnt string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		mi, err := os.ReadFile(filepath.Join("/proc", e.Name(), "mountinfo"))
		if err != nil || !bytes.Contains(mi, []byte(" "+mnt+" ")) {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%s %.60s", e.Name(), bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return out
}

// TestBindLaterHostMountHidden: a bind mount's tree is what the host had
// below it when the episode started (a mount there then shows); a mount
// the host makes below it later does not reach the guest, even where the
// host's mounts are shared (init's copy of them is a slave, so unmounts
// do reach it: TestHostUnmountNotPinned). docker run -v does the same
// (rprivate).
func TestBindLaterHostMountHidden(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount (CI runs as root)")
	}
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		// Not below the suite's shared dir: other packages' tests running
		// meanwhile count new mounts whose path says "rungv" as theirs.
		base, err := os.MkdirTemp("", "gvx-bind-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		top := filepath.Join(base, "bound")
		for _, d := range []string{top, top + "/before", top + "/later"} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		hostMount(t, "--bind", top, top)
		hostMount(t, "--make-shared", top)
		t.Cleanup(func() { exec.Command("umount", "-R", "-l", top).Run() })
		hostMount(t, "-t", "tmpfs", "-o", "mode=0755", "before", top+"/before")
		if err := os.WriteFile(top+"/before/f", []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c := command(t, u, privateTmp(t, u), "run", "--network", "none", "--mount", "type=bind,src="+top+",dst=/d,readonly", imageRef,
			"sh", "-c", "cat /d/before/f; echo started; read x; cat /d/later/f 2>&1; echo done")
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		line, stderr := startLines(t, c)
		if s := line(); s != "before" {
			t.Fatalf("the mount below the bind at the episode's start: %q (stderr %q)", s, stderr)
		}
		if s := line(); s != "started" {
			t.Fatalf("guest: %q", s)
		}
		hostMount(t, "-t", "tmpfs", "-o", "mode=0755", "later", top+"/later")
		if err := os.WriteFile(top+"/later/f", []byte("host secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		in.Write([]byte("go\n"))
		if s := line(); strings.Contains(s, "host secret") {
			t.Fatalf("the guest read a mount the host made after the episode started: %q", s)
		}
		if s := line(); s != "done" {
			t.Fatalf("guest: %q", s)
		}
	})
}

// TestRunEnvHygiene starts `rungv run` from a shell-like caller whose
// environment holds secrets (a server's token, a credential of its own):
// neither reaches the supervisor or init (their /proc/PID/environ, which
// the caller's uid, or whoever gets at those processes, could read), and
// the guest's environment is the spec's only. rungv itself keeps what the
// caller gave it (it is the caller's program).
func TestRunEnvHygiene(t *testing.T) {
	const token, secret = "gvx-serve-token-6f1e", "foo-secret-93ab"
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", "--network", "none", "-e", "SPEC_VAR=from-spec", imageRef,
			"sh", "-c", "env; echo started; exec sleep 1000")
		c.Env = append(c.Env, "GVX_SERVE_TOKEN="+token, "FOO_SECRET="+secret,
			"GVX_STOP_TIMEOUT=forged", "GVX_EPISODE=forged")
		line, _ := startLines(t, c)
		var guest []string
		for {
			s := line()
			if s == "started" {
				break
			}
			guest = append(guest, s)
		}
		sup := childMentioning(c.Process.Pid, "_gvx-supervise")
		if sup == 0 {
			t.Fatal("no supervisor found")
		}
		init := childMentioning(sup, "_gvx-init")
		if init == 0 {
			t.Fatal("no init found under the supervisor")
		}
		for _, p := range []struct {
			name string
			pid  int
		}{{"supervisor", sup}, {"init", init}} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			for _, bad := range []string{token, secret, "GVX_SERVE_TOKEN", "FOO_SECRET", "forged"} {
				if bytes.Contains(b, []byte(bad)) {
					t.Errorf("the %s's environment holds %q of the caller's (variables: %s)", p.name, bad, envNames(b))
				}
			}
			if !bytes.Contains(b, []byte("\x00TMPDIR="+tmp+"\x00")) && !bytes.HasPrefix(b, []byte("TMPDIR="+tmp+"\x00")) {
				t.Errorf("the %s lacks the caller's TMPDIR", p.name)
			}
		}
		env := strings.Join(guest, "\n")
		if strings.Contains(env, token) || strings.Contains(env, secret) || strings.Contains(env, "GVX_") ||
			!strings.Contains(env, "SPEC_VAR=from-spec") || !strings.Contains(env, "PATH=") {
			t.Errorf("the guest's environment is not the spec's:\n%s", env)
		}
	})
}

// envNames is the names of the variables of a /proc/PID/environ, not their
// values (which may be the test runner's own secrets).
func envNames(environ []byte) string {
	var names []string
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, _, ok := bytes.Cut(kv, []byte("=")); ok {
			names = append(names, string(k))
		}
	}
	return strings.Join(names, " ")
}

// TestEpisodeHoldsNoHostMount plays the host's admin against a leak:
// a loop-mounted filesystem, private on the host (as mounts are where /
// is not shared, in a container for one), is mounted before an episode
// starts. No process of the episode with a mount namespace of its own may
// have it in its mountinfo (the episode's init copied the whole host tree,
// and the sandbox and gofer started from that copy), and once the host
// unmounts it, its loop device must be detached at once, the episode
// still running (the copy pinned it until the episode ended). Processes
// in the caller's own mount namespace (rungv run itself) hold no copy.
func TestEpisodeHoldsNoHostMount(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to loop-mount (CI runs as root)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Skip(err)
	}
	both(t, func(t *testing.T, u user) {
		dir := t.TempDir()
		img, mnt := filepath.Join(dir, "canary.img"), filepath.Join(dir, "canary")
		if out, err := exec.Command("mkfs.ext4", "-q", img, "16M").CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v %s", err, out)
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		hostMount(t, "-o", "loop", img, mnt)
		mounted := true
		t.Cleanup(func() {
			if mounted {
				exec.Command("umount", "-l", mnt).Run()
			}
		})
		hostMount(t, "--make-private", mnt)
		backing := loopBacking(t, mnt)

		c := command(t, u, privateTmp(t, u), "run", "--network", "none", imageRef, "sh", "-c", "echo started; exec sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		copies := 0
		for _, pid := range hostiletest.Descendants(c.Process.Pid) {
			p := "/proc/" + strconv.Itoa(pid)
			ns, err := os.Readlink(p + "/ns/mnt")
			if err != nil || ns == self {
				continue // gone, or the caller's own namespace
			}
			mi, err := os.ReadFile(p + "/mountinfo")
			if err != nil {
				continue
			}
			copies++
			if bytes.Contains(mi, []byte(" "+mnt+" ")) {
				cl, _ := os.ReadFile(p + "/cmdline")
				t.Errorf("process %d (%.60s) of the episode has the host's %s mounted", pid, bytes.ReplaceAll(cl, []byte{0}, []byte{' '}), mnt)
			}
		}
		t.Logf("%d processes of the episode have a mount namespace of their own", copies)

		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Fatalf("host umount: %v %s", err, out)
		}
		mounted = false
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(backing); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("10 s after the host unmounted %s, its loop device is still attached: %v hold it", mnt, mountHolders(mnt))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if c.ProcessState != nil || syscall.Kill(c.Process.Pid, 0) != nil {
			t.Fatal("the episode ended")
		}
	})
}
