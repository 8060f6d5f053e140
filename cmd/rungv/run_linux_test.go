package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/runtime/runtimetest"
)

// The suite builds rungv once and a busybox OCI image once, in a directory
// every user may read (the rootless variants run them as nobody).
var (
	shared   string // 0755 dir holding the binary and the image
	rungvBin string
	imageRef string
	setupErr error
)

func TestMain(m *testing.M) {
	if pid := os.Getenv(memProbeEnv); pid != "" {
		memProbe(pid) // a helper of TestLockdown
		return
	}
	code := func() int {
		env, err := runtimetest.NewEnv("rungv-test-", v1.Config{
			Cmd:        []string{"sh"},
			Env:        []string{"PATH=/bin", "FROM_IMAGE=yes", "OVERRIDE=image"},
			WorkingDir: "/tmp",
		}, runtimetest.File{Path: "bin/entry", Mode: 0o755, Body: "#!/bin/sh\necho entry \"$@\"\n"})
		if env.Dir != "" {
			defer os.RemoveAll(env.Dir)
		}
		shared, rungvBin, imageRef, setupErr = env.Dir, env.Rungv, env.ImageRef, err
		return m.Run()
	}()
	os.Exit(code)
}

// user is who runs rungv.
type user struct {
	name string
	wrap []string // command prefix
}

var (
	asRoot   = user{name: "root"}
	asNobody = user{name: "nobody", wrap: []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}}
)

func need(t *testing.T, u user) {
	t.Helper()
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	if os.Getuid() != 0 {
		if u.name == "root" {
			t.Skip("needs root (CI runs as root); the rootless variant runs as the current user")
		}
		return
	}
	if u.name == "nobody" {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("setpriv (util-linux) is missing: cannot run as nobody")
		}
		runtimetest.NeedUserNamespace(t, rungvBin, u.name, u.wrap...)
	}
}

// needNamespaces skips t, with rungv's reason and the fix, where rungv run
// as u cannot make its namespaces here (a chroot, user.max_user_namespaces
// 0, a container's seccomp filter: --isolation auto then runs
// seccomp-only), for a test of what only the namespaced mode does: the
// supervisor that cleans up after a SIGKILLed rungv, runsc's gofer for
// binds of host paths. Where they can be made the test runs.
func needNamespaces(t *testing.T, u user) {
	t.Helper()
	runtimetest.NeedNamespaces(t, rungvBin, u.name, u.wrap...)
}

func both(t *testing.T, f func(t *testing.T, u user)) {
	for _, u := range []user{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			need(t, u)
			f(t, u)
		})
	}
}

// command returns a rungv command run as u with a private TMPDIR (so the
// test sees every state directory the episode makes).
func command(t *testing.T, u user, tmp string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, u.wrap...), rungvBin), args...)
	c := boundedCommand(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"))
	return c
}

// privateTmp is a TMPDIR u may write.
func privateTmp(t *testing.T, u user) string {
	d, err := os.MkdirTemp(shared, "tmp-")
	if err != nil {
		t.Fatal(err)
	}
	if u.name == "nobody" {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type result struct {
	stdout, stderr string
	code           int
}

func runRungv(t *testing.T, u user, tmp string, stdin string, args ...string) result {
	t.Helper()
	return runRungvFrom(t, u, tmp, strings.NewReader(stdin), args...)
}

// runRungvFrom is runRungv with its standard input read from stdin.
func runRungvFrom(t *testing.T, u user, tmp string, stdin io.Reader, args ...string) result {
	t.Helper()
	c := command(t, u, tmp, args...)
	var so, se bytes.Buffer
	c.Stdout, c.Stderr, c.Stdin = &so, &se, stdin
	err := c.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("rungv %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{so.String(), se.String(), code}
}

// startLines starts c and returns a reader of its standard output, line by
// line (failing t at its end), and its standard error so far (unless c
// already had a Stderr). c is killed when t ends.
func startLines(t *testing.T, c *exec.Cmd) (line func() string, stderr *strings.Builder) {
	t.Helper()
	pr, pw, _ := os.Pipe()
	c.Stdout = pw
	stderr = &strings.Builder{}
	if c.Stderr == nil { // a caller's own writer wins; stderr stays empty
		c.Stderr = stderr
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	out := bufio.NewReader(pr)
	return func() string {
		// A line that never comes fails the test; a grandchild holding the
		// pipe open must not keep the read waiting past the command's limit.
		pr.SetReadDeadline(time.Now().Add(cmdLimit))
		s, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("guest output: %q %v (stderr %q)", s, err, stderr.String())
		}
		return strings.TrimSpace(s)
	}, stderr
}

// checkClean asserts that no state directory, process or mount of episodes
// using tmp remains.
func checkClean(t *testing.T, tmp string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := leftovers(tmp)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %s", strings.Join(left, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func leftovers(tmp string) []string {
	var left []string
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if e.Name() != "cache" {
			left = append(left, "file "+filepath.Join(tmp, e.Name()))
		}
	}
	for _, p := range processesMentioning(tmp) {
		left = append(left, "process "+p)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mi, []byte(tmp)) {
		left = append(left, "a host mount under "+tmp)
	}
	return left
}

// processesMentioning lists processes whose command line contains s.
func processesMentioning(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cl, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie of the test's own child, not yet reaped
		}
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	return out
}

func TestRunEcho(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", imageRef, "echo", "hi")
		if r.stdout != "hi\n" || r.code != 0 {
			t.Fatalf("got %q (stderr %q) exit %d, want \"hi\\n\" exit 0", r.stdout, r.stderr, r.code)
		}
		checkClean(t, tmp)
	})
}

func TestExitCode(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		for _, tc := range []struct {
			script string
			want   int
		}{
			{"exit 7", 7},
			{"exit 0", 0},
			{"kill -KILL $$", 137},
			{"exit 255", 255},
		} {
			r := runRungv(t, u, tmp, "", "run", imageRef, "sh", "-c", tc.script)
			if r.code != tc.want {
				t.Errorf("sh -c %q: exit %d (stderr %q), want %d", tc.script, r.code, r.stderr, tc.want)
			}
		}
		checkClean(t, tmp)
	})
}

func TestStdio(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "from stdin\n", "run", imageRef, "sh", "-c", "cat; echo to-stderr >&2")
		if r.stdout != "from stdin\n" || r.stderr != "to-stderr\n" {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		// A regular file as stdout gets every line, in order.
		out := filepath.Join(tmp, "out.txt")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if u.name == "nobody" {
			_ = f.Chown(65534, 65534)
		}
		c := command(t, u, tmp, "run", imageRef, "sh", "-c", "echo one; echo two")
		c.Stdout = f
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if b, _ := os.ReadFile(out); string(b) != "one\ntwo\n" {
			t.Fatalf("file stdout %q", b)
		}
		os.Remove(out)
	})
}

// TestDockerRunSemantics checks env, entrypoint, cmd, workdir and user
// merging against what docker run does with the same image config.
func TestDockerRunSemantics(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"image env and -e", []string{"-e", "OVERRIDE=cli", "-e", "NEW=1", imageRef, "sh", "-c", "echo $FROM_IMAGE $OVERRIDE $NEW $HOME $PATH"}, "yes cli 1 /root /bin\n"},
			{"-e KEY copies the host's", []string{"-e", "TMPDIR", imageRef, "sh", "-c", "echo $TMPDIR"}, tmp + "\n"},
			{"value with commas", []string{"-e", "L=a,b,c", imageRef, "sh", "-c", "echo $L"}, "a,b,c\n"},
			{"image workdir", []string{imageRef, "pwd"}, "/tmp\n"},
			{"--workdir", []string{"--workdir", "/etc", imageRef, "pwd"}, "/etc\n"},
			{"-w makes a missing dir", []string{"-w", "/new/dir", imageRef, "pwd"}, "/new/dir\n"},
			{"--entrypoint drops the image cmd", []string{"--entrypoint", "/bin/entry", imageRef}, "entry\n"},
			{"--entrypoint with args", []string{"--entrypoint", "/bin/entry", imageRef, "a", "b"}, "entry a b\n"},
			{"default user", []string{imageRef, "id"}, "uid=0(root) gid=0(root) groups=0(root)\n"},
			{"--user name", []string{"--user", "alice", imageRef, "sh", "-c", "id; echo $HOME"}, "uid=1000(alice) gid=1000(alice) groups=50(staff)\n/home/alice\n"},
			{"--user uid:gid", []string{"-u", "1000:50", imageRef, "id"}, "uid=1000(alice) gid=50(staff) groups=50(staff)\n"},
			{"--user unknown uid", []string{"-u", "4242", imageRef, "sh", "-c", "id -u; echo $HOME"}, "4242\n/\n"},
			{"privileged by default (Sentry capabilities, cgroupfs)", []string{imageRef, "sh", "-c", "grep CapEff /proc/self/status; [ -d /sys/fs/cgroup/cpu ] && echo cgroupfs"}, "CapEff:\t000001ffffffdfff\ncgroupfs\n"},
			{"--privileged=false: docker's set (runsc drops NET_RAW without --net-raw)", []string{"--privileged=false", imageRef, "sh", "-c", "grep CapEff /proc/self/status"}, "CapEff:\t00000000a80405fb\n"},
			{"hostname", []string{imageRef, "sh", "-c", "[ \"$(hostname)\" = \"$HOSTNAME\" ] && echo same"}, "same\n"},
		} {
			r := runRungv(t, u, tmp, "", append([]string{"run"}, tc.args...)...)
			if r.stdout != tc.want || r.code != 0 {
				t.Errorf("%s: got %q exit %d (stderr %q), want %q", tc.name, r.stdout, r.code, r.stderr, tc.want)
			}
		}
		r := runRungv(t, u, tmp, "", "run", "--user", "nosuchuser", imageRef, "id")
		if r.code != 125 || !strings.Contains(r.stderr, "unable to find user nosuchuser") {
			t.Errorf("unknown user: exit %d stderr %q, want 125 and docker's message", r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--entrypoint", "", imageRef)
		if r.code != 125 || !strings.Contains(r.stderr, "no command specified") {
			t.Errorf("no command: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// TestKillLeavesNothing SIGKILLs rungv while the guest runs: its sandbox,
// gofer and state directory must go too.
func TestKillLeavesNothing(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", imageRef, "sh", "-c", "echo started; exec sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		pid := c.Process.Pid
		if u.name == "nobody" { // c is setpriv, which exec'd rungv: same pid
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != rungvBin {
				t.Fatalf("pid %d is %s, not rungv", pid, exe)
			}
		}
		if n := len(processesMentioning(tmp)); n < 3 {
			t.Fatalf("only %d episode processes running, want supervisor, runsc and sandbox", n)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		checkClean(t, tmp)
	})
}

// TestSignalForwarded sends SIGTERM to rungv: the guest gets it and its
// exit code comes back.
func TestSignalForwarded(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", imageRef, "sh", "-c", "trap 'echo got-term; exit 3' TERM; echo started; while :; do sleep 0.1; done")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		got := line()
		err := c.Wait()
		var ee *exec.ExitError
		if got != "got-term" || !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("after SIGTERM: output %q, wait %v; want got-term and exit 3", got, err)
		}
		checkClean(t, tmp)
	})
}
