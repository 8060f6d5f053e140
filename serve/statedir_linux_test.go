package serve_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/serve"
)

// sleeper is a live process that is not rungv, for records to name; it
// is killed at the end of the test.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "600")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// plant writes an episode directory and record naming pid (with its start
// time) under state, as uid:gid with the given directory mode.
func plant(t *testing.T, state string, pid, uid int, mode os.FileMode) string {
	t.Helper()
	ep := filepath.Join(state, "ep", "00000000deadbeef")
	if err := os.MkdirAll(ep, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"id":"00000000deadbeef","rungv_pid":%d,"rungv_start":%d}`, pid, startTime(t, pid))
	if err := os.WriteFile(filepath.Join(ep, "record.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ep, "record.json"), ep, filepath.Dir(ep), state} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{ep, filepath.Dir(ep), state} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return ep
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: another local user (nobody) needs root to play")
	}
}

// TestStateDirTakenOver: another local user (nobody) made the state
// directory first, world-writable, and planted a record in it naming a
// process of root's. A server (root) refuses the directory — named with
// --state-dir, or rungv serve's default in $TMPDIR — with an error naming
// it, its owner and mode, and the fix; the process lives on.
func TestStateDirTakenOver(t *testing.T) {
	needRoot(t)
	tmp := shortDir(t)
	if err := os.Chmod(tmp, 0o1777); err != nil { // a shared /tmp
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	victim := sleeper(t)
	named := filepath.Join(tmp, "st")
	def := filepath.Join(tmp, "gvx-serve-0") // what the default is for a user without XDG_RUNTIME_DIR
	for _, dir := range []string{named, def} {
		plant(t, dir, victim.Process.Pid, 65534, 0o777)
		_, err := serve.New(serve.Config{StateDir: dir, Rungv: "/bin/true"})
		for _, want := range []string{dir + " is owned by uid 65534, mode 0777: it must be yours", "remove it", "--state-dir"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("state dir %s another user made: %v, want %q", dir, err, want)
			}
		}
		if !alive(victim.Process.Pid) {
			t.Fatalf("the process the planted record in %s named was killed", dir)
		}
	}
	// Root's own, but writable by all (made so by another root tool, or
	// the default's parent's umask): refused too.
	own := filepath.Join(tmp, "own")
	plant(t, own, victim.Process.Pid, 0, 0o777)
	if _, err := serve.New(serve.Config{StateDir: own, Rungv: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "mode 0777") {
		t.Errorf("world-writable state dir of root's: %v", err)
	}
	// The default in the shared temporary directory must be 0700 exactly:
	// a 0755 one lets everyone list the episodes.
	os.RemoveAll(def)
	if err := os.Mkdir(def, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := serve.New(serve.Config{StateDir: def, Rungv: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "mode 0700 exactly") {
		t.Errorf("default state dir of mode 0755: %v", err)
	}
	// Once removed, the server makes it itself, private.
	os.RemoveAll(def)
	srv, err := serve.New(serve.Config{StateDir: def, Rungv: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if st, err := os.Lstat(def); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("made state dir: %v %v", st, err)
	}
	if !alive(victim.Process.Pid) {
		t.Fatal("the process a planted record named was killed")
	}
}

// TestDefaultStateDir: rungv serve's default state directory is
// $XDG_RUNTIME_DIR/gvx-serve, else /run/gvx for root, else
// $TMPDIR/gvx-serve-UID; and a user's server refuses the last when
// another user made it first.
func TestDefaultStateDir(t *testing.T) {
	tmp := shortDir(t)
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1234")
	if d := serve.DefaultStateDir(); d != "/run/user/1234/gvx-serve" {
		t.Errorf("with XDG_RUNTIME_DIR: %s", d)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	want := filepath.Join(tmp, "gvx-serve-"+strconv.Itoa(os.Geteuid()))
	if os.Geteuid() == 0 {
		want = "/run/gvx"
	}
	if d := serve.DefaultStateDir(); d != want {
		t.Errorf("without XDG_RUNTIME_DIR: %s, want %s", d, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	// rungv serve as nobody, without --state-dir: root made nobody's
	// default first, world-writable.
	need(t)
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(tmp, "gvx-serve-65534")
	if err := os.Mkdir(taken, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(taken, 0o777)
	cmd := exec.Command(env.Rungv, "serve", "-q")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_RUNTIME_DIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdout, _ := cmd.StdoutPipe()
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// A server that started says hello; a refused one exits.
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err == nil {
		t.Fatalf("rungv serve started in a state dir root made world-writable: %s", line)
	}
	cmd.Wait()
	if msg := stderr.String(); !strings.Contains(msg, taken+" is owned by uid 0, mode 0777") || !strings.Contains(msg, "XDG_RUNTIME_DIR") {
		t.Errorf("rungv serve's error: %s", msg)
	}
}

// TestReapTrustsOnlyItsOwn: the reaper kills only what a record it can
// trust names, and only if that process runs rungv. A record in an
// episode directory another user owns is not believed (the server will
// not start until it is removed); a record in the server's own directory
// naming a process that runs something else (sleep) does not get it
// killed; one naming a process that runs the server's rungv does.
func TestReapTrustsOnlyItsOwn(t *testing.T) {
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	if sleepBin, err = filepath.EvalSymlinks(sleepBin); err != nil {
		t.Fatal(err)
	}
	t.Run("not-rungv", func(t *testing.T) {
		// The server's own record, naming sleep: spared, the directory
		// reaped.
		victim := sleeper(t)
		state := filepath.Join(shortDir(t), "st")
		ep := plant(t, state, victim.Process.Pid, os.Geteuid(), 0o700)
		srv, err := serve.New(serve.Config{StateDir: state, Rungv: "/bin/true", Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if !alive(victim.Process.Pid) {
			t.Fatal("a record made the reaper kill a process that is not rungv")
		}
		if _, err := os.Lstat(ep); !os.IsNotExist(err) {
			t.Errorf("the stale episode dir survived: %v", err)
		}
	})
	t.Run("other-users-dir", func(t *testing.T) {
		// An episode directory another user owns, inside the server's,
		// naming a process that runs the server's "rungv".
		needRoot(t)
		victim := sleeper(t)
		state := filepath.Join(shortDir(t), "st")
		ep := plant(t, state, victim.Process.Pid, 0, 0o700)
		for _, p := range []string{ep, filepath.Join(ep, "record.json")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		_, err := serve.New(serve.Config{StateDir: state, Rungv: sleepBin, Logf: t.Logf})
		if err == nil || !strings.Contains(err.Error(), ep+" is owned by uid 65534") || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("episode dir of another user's: %v", err)
		}
		if !alive(victim.Process.Pid) {
			t.Fatal("a record in another user's episode dir made the reaper kill")
		}
		if _, err := os.Lstat(ep); err != nil {
			t.Errorf("another user's episode dir was removed: %v", err)
		}
	})
	t.Run("symlinked-record", func(t *testing.T) {
		// A record that is a symlink to one elsewhere: not believed.
		victim := sleeper(t)
		dir := shortDir(t)
		state := filepath.Join(dir, "st")
		ep := plant(t, state, victim.Process.Pid, os.Geteuid(), 0o700)
		elsewhere := filepath.Join(dir, "elsewhere.json")
		if err := os.Rename(filepath.Join(ep, "record.json"), elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(ep, "record.json")); err != nil {
			t.Fatal(err)
		}
		if _, err := serve.New(serve.Config{StateDir: state, Rungv: sleepBin, Logf: t.Logf}); err == nil || !strings.Contains(err.Error(), "is a symlink") {
			t.Errorf("record that is a symlink: %v", err)
		}
		if !alive(victim.Process.Pid) {
			t.Fatal("a symlinked record made the reaper kill")
		}
	})
	t.Run("rungv-is-killed", func(t *testing.T) {
		// The control: a record naming a process that runs the server's
		// "rungv" (sleep, here) gets it killed.
		victim := sleeper(t)
		state := filepath.Join(shortDir(t), "st")
		plant(t, state, victim.Process.Pid, os.Geteuid(), 0o700)
		srv, err := serve.New(serve.Config{StateDir: state, Rungv: sleepBin, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if alive(victim.Process.Pid) {
			t.Error("the process its record names, running the server's rungv, was not killed")
		}
	})
}
