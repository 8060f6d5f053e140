package main

import (
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The guest is hostile: these tests play it against -p.

// TestPublishShowsNoHostDirectory is the seeds' layout as an attacker meets
// it: the episode's socket beside other episodes' volumes and sockets and
// a file of the caller's. The guest hunts for them, tries to write beside
// its socket and to replace a sibling's socket; it must find and change
// nothing of the host. (Before, the socket's directory was bind-mounted
// read-write into the guest at /.gvx/p0.)
func TestPublishShowsNoHostDirectory(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		dir := privateTmp(t, u) // /srv/rl-episodes
		for name, body := range map[string]string{"ep-0041.ext4": "another episode's volume", "secret-of-the-caller": "token"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sibling, err := net.Listen("unix", filepath.Join(dir, "ep-0041.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer sibling.Close()
		before := listDir(t, dir)
		sock := filepath.Join(dir, "ep-0042.sock")
		script := `
find / -path /proc -prune -o -path /sys -prune -o \( -name 'ep-0041*' -o -name 'secret-of-the-caller' -o -name 'ep-0042.sock' \) -print 2>/dev/null | sed 's/^/found /'
grep -v ' /proc\| /sys\| /dev' /proc/mounts | sed 's/^/mount /'
ls -a /.gvx | sed 's/^/gvx /'
grep ' /.gvx ' /proc/mounts | sed 's/^/relaymount /'
echo done`
		out := runRungv(t, u, tmp, "", "run", "--network", "none", "-p", "unix:"+sock+":2375", imageRef, "sh", "-c", script)
		if out.code != 0 || !strings.Contains(out.stdout, "done") || !strings.Contains(out.stdout, "relaymount ") {
			t.Fatalf("guest: exit %d, stdout %q, stderr %q", out.code, out.stdout, out.stderr)
		}
		for _, l := range strings.Split(out.stdout, "\n") {
			switch {
			case strings.HasPrefix(l, "found "):
				t.Errorf("the guest reached the host: %q", l)
			case strings.HasPrefix(l, "gvx ") && l != "gvx ." && l != "gvx .." && l != "gvx rungv":
				t.Errorf("/.gvx holds more than the relay: %q", l)
			case strings.HasPrefix(l, "mount ") && strings.Contains(l, dir):
				t.Errorf("a host directory is mounted in the guest: %q", l)
			case strings.HasPrefix(l, "relaymount ") && !strings.Contains(l, " erofs "):
				t.Errorf("the relay is not a copy in an EROFS image of its own: %q", l)
			}
		}
		if after := listDir(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
			t.Errorf("the socket's directory changed: before %v, after %v", before, after)
		}
		c, err := net.Dial("unix", filepath.Join(dir, "ep-0041.sock"))
		if err != nil {
			t.Errorf("the sibling's socket no longer answers: %v", err)
		} else {
			c.Close()
		}
		checkClean(t, tmp)
	})
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestPublishSocketFile checks the socket file the host side makes: mode
// 0600, owned by the caller, gone when the episode ends, even by SIGKILL
// of rungv; a path that holds anything but a stale socket of the caller's
// is refused (and left alone), and a live socket is never taken over.
func TestPublishSocketFile(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		dir := privateTmp(t, u)
		sock := filepath.Join(dir, "ep.sock")

		c := command(t, u, tmp, "run", "--network", "none", "-p", "unix:"+sock+":2375", imageRef, "sh", "-c", "echo started; exec sleep 1000")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		st, err := os.Lstat(sock)
		if err != nil {
			t.Fatal(err)
		}
		uid := uint32(0)
		if u.name == "nobody" {
			uid = 65534
		}
		if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != uid {
			t.Errorf("socket %s: mode %v uid %d, want a socket 0600 of uid %d", sock, st.Mode(), st.Sys().(*syscall.Stat_t).Uid, uid)
		}
		// A second episode on the same path must not take it over.
		out := runRungv(t, u, tmp, "", "run", "--network", "none", "-p", "unix:"+sock+":80", imageRef, "true")
		if out.code != 125 || !strings.Contains(out.stderr, "live socket") {
			t.Errorf("second episode on a live socket: exit %d, stderr %q; want 125 and a clear error", out.code, out.stderr)
		}
		if err := syscall.Kill(c.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		checkClean(t, tmp)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Lstat(sock); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is still there after rungv was killed", sock)
			}
			time.Sleep(50 * time.Millisecond)
		}

		// Not a socket: refused, untouched.
		if err := os.WriteFile(sock, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
		if u.name == "nobody" {
			os.Chown(sock, 65534, 65534)
		}
		out = runRungv(t, u, tmp, "", "run", "--network", "none", "-p", "unix:"+sock+":80", imageRef, "true")
		if b, _ := os.ReadFile(sock); out.code != 125 || string(b) != "keep me" || !strings.Contains(out.stderr, sock) {
			t.Errorf("publish over a regular file: exit %d, stderr %q, file now %q; want 125, the path named, the file kept", out.code, out.stderr, b)
		}
		os.Remove(sock)

		// A symlink (to a socket elsewhere): refused, not followed.
		target := filepath.Join(dir, "elsewhere.sock")
		l, err := net.Listen("unix", target)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Symlink(target, sock); err != nil {
			t.Fatal(err)
		}
		out = runRungv(t, u, tmp, "", "run", "--network", "none", "-p", "unix:"+sock+":80", imageRef, "true")
		if st, err := os.Lstat(sock); out.code != 125 || err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("publish over a symlink: exit %d, stderr %q; want 125 and the link kept", out.code, out.stderr)
		}
		os.Remove(sock)

		// A stale socket of the caller's (its episode was killed with its
		// supervisor): replaced.
		stale, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		stale.Close()
		if u.name == "nobody" {
			os.Lchown(sock, 65534, 65534)
		}
		out = runRungv(t, u, tmp, "", "run", "--network", "none", "-p", "unix:"+sock+":80", imageRef, "true")
		if out.code != 0 {
			t.Errorf("publish over a stale socket: exit %d, stderr %q; want it replaced", out.code, out.stderr)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%s left after the episode: %v", sock, err)
		}
		checkClean(t, tmp)
	})
}
