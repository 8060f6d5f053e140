package hostiletest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// swapEnv and swapTargetEnv tell a re-executed test binary to be
// SymlinkSwapper's attacker, of which directory, with which target.
const (
	swapEnv       = "GVX_HOSTILETEST_SWAP"
	swapTargetEnv = "GVX_HOSTILETEST_SWAP_TARGET"
)

func init() {
	if dir := os.Getenv(swapEnv); dir != "" {
		swapper(dir, os.Getenv(swapTargetEnv))
		os.Exit(0)
	}
}

// SymlinkSwapper is another local user (uid 65534, nobody) who owns dir
// and attacks whoever creates a file in it, then acts on it by path (a
// bind, then a chmod): a process of theirs watches dir with inotify and
// replaces every new entry, as soon as it appears, with a symlink to
// target (the entry is renamed aside, the symlink put at its name). It
// runs until the test ends. It returns how many entries it has swapped so
// far, so a test can show the attacker did act. The caller must be root;
// dir must be nobody's, its ancestors searchable by nobody.
func SymlinkSwapper(t testing.TB, dir, target string) (swaps func() int64) {
	t.Helper()
	exe := nobodyCopy(t)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), swapEnv+"="+dir, swapTargetEnv+"="+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(out)
	if b, err := r.ReadByte(); err != nil || b != 'r' {
		t.Fatalf("the swapper did not start watching %s: %q %v", dir, b, err)
	}
	var n atomic.Int64
	go func() {
		b := make([]byte, 512)
		for {
			k, err := r.Read(b)
			n.Add(int64(bytes.Count(b[:k], []byte{'s'})))
			if err != nil {
				return
			}
		}
	}()
	return n.Load
}

// NobodyDir is a new directory nobody (uid 65534) owns, for
// SymlinkSwapper, and a victim: a file of root's, mode 0644, outside it
// (VictimUnchanged checks it). The test skips unless it runs as root.
func NobodyDir(t testing.TB) (dir, victim string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the other local user (nobody) needs root to set up")
	}
	top, err := os.MkdirTemp("", "hostile-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	dir, victim = filepath.Join(top, "nobody"), filepath.Join(top, "victim")
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte(victimText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(victim, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, victim
}

const victimText = "root's file\n"

// VictimUnchanged fails the test unless NobodyDir's victim still has its
// mode and content.
func VictimUnchanged(t testing.TB, victim string) {
	t.Helper()
	st, err := os.Lstat(victim)
	b, _ := os.ReadFile(victim)
	if err != nil || st.Mode() != 0o644 || string(b) != victimText {
		t.Errorf("root's file %s is now %v %q (%v): the other user won", victim, st.Mode(), b, err)
	}
}

// nobodyCopy is a copy of the test binary that nobody may run (the go
// tool builds it in a directory of root's only).
func nobodyCopy(t testing.TB) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hostiletest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exe := filepath.Join(dir, "attacker")
	dst, err := os.OpenFile(exe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

// swapper is SymlinkSwapper's attacker, in its own process as nobody. It
// writes 'r' once it watches dir, then 's' per swap.
func swapper(dir, target string) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		os.Exit(2)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		os.Exit(3)
	}
	w := io.Writer(os.Stdout)
	w.Write([]byte{'r'})
	buf := make([]byte, 64<<10)
	seq := 0
	ours := map[string]int{} // symlinks it made, whose creation it will see
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			os.Exit(4)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameb := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			name := string(bytes.TrimRight(nameb, "\x00"))
			if name == "" || strings.HasPrefix(name, "junk-") {
				continue
			}
			if ours[name] > 0 {
				ours[name]--
				continue
			}
			p := filepath.Join(dir, name)
			seq++
			if unix.Rename(p, filepath.Join(dir, "junk-"+strconv.Itoa(seq))) != nil {
				continue
			}
			if unix.Symlink(target, p) == nil {
				ours[name]++
				w.Write([]byte{'s'})
			}
		}
	}
}
