package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestVolumeSourceIsOpenedNotLookedUp plays the attacker who swapped a
// sibling episode's volume file for a symlink to the golden volume (or to
// a file of the caller's): the next episode on that name must refuse it
// instead of writing through it, and a volume of another user is refused
// unless the mount allows it. Before, src= was opened by path (following
// symlinks) by the gofer after the runtime had checked it with stat.
func TestVolumeSourceIsOpenedNotLookedUp(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		golden := newVolume(t, u, 64<<20)
		sum := fileMD5(t, golden)
		dir := privateTmp(t, u)
		ep := filepath.Join(dir, "ep-0043.ext4")
		if err := os.Symlink(golden, ep); err != nil {
			t.Fatal(err)
		}
		write := "echo pwned > /d/pwned && sync"
		r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+ep+",dst=/d", imageRef, "sh", "-c", write)
		if r.code != 125 || !strings.Contains(r.stderr, "symbolic link") {
			t.Errorf("a symlinked volume: exit %d, stderr %q; want 125 and the reason", r.code, r.stderr)
		}
		if got := fileMD5(t, golden); got != sum {
			t.Errorf("the golden volume changed through a symlink: md5 %s, was %s", got, sum)
		}
		// A dangling symlink is not a missing volume to create.
		dangling := filepath.Join(dir, "ep-0044.ext4")
		outside := filepath.Join(dir, "not-a-volume")
		if err := os.Symlink(outside, dangling); err != nil {
			t.Fatal(err)
		}
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+dangling+",dst=/d", imageRef, "true")
		if _, err := os.Lstat(outside); r.code != 125 || err == nil {
			t.Errorf("a dangling symlink: exit %d, stderr %q, target made: %v; want 125 and nothing created", r.code, r.stderr, err == nil)
		}
		// A FIFO must not hang the start.
		fifo := filepath.Join(dir, "ep-0045.ext4")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if u.name == "nobody" {
			os.Chown(fifo, 65534, 65534)
		}
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+fifo+",dst=/d", imageRef, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("a FIFO volume: exit %d, stderr %q", r.code, r.stderr)
		}

		// Another user's volume: refused, and allowed with allow-foreign.
		other := newVolume(t, asNobody, 64<<20) // owned by root when u is nobody
		if u.name == "root" {
			if err := os.Chown(other, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(other, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(other), 0o711); err != nil { // the episode's root is not the host's
			t.Fatal(err)
		}
		if u.name == "nobody" {
			if err := os.Chown(other, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+other+",dst=/d", imageRef, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "allow-foreign") {
			t.Errorf("another user's volume: exit %d, stderr %q; want 125 and the way to allow it", r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+other+",dst=/d,allow-foreign", imageRef, "sh", "-c", "echo ok > /d/f && cat /d/f")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ok" {
			t.Errorf("allow-foreign: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		checkClean(t, tmp)
	})
}

func fileMD5(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return md5Of(t, f)
}

// TestVolumeOpenFilesBounded: a guest that holds files open on a volume by
// the thousand is refused past the mount's max-open (ENFILE) instead of
// growing the volume server without bound, and works again once it lets
// go. The default is 65536 (runtime/volume.DefaultMaxOpen). The Sentry
// keeps up to a quarter of max-open in unused dentries cached (625 here;
// runtime.volumeDentryCache), two FDs each, which count too.
func TestVolumeOpenFilesBounded(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 64<<20)
		script := `ulimit -n 8192
mkdir /d/many && cd /d/many
i=0; while [ $i -lt 1500 ]; do : > f$i; i=$((i+1)); done
tail -f f* >/dev/null 2>/tmp/err &
sleep 2
grep -c 'Too many open files in system' /tmp/err
kill $!; wait
cat f1499 f0 && echo reopened`
		r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d,max-open=2500", imageRef, "sh", "-c", script)
		lines := strings.Fields(r.stdout)
		if r.code != 0 || len(lines) != 2 || lines[0] == "0" || lines[1] != "reopened" {
			t.Fatalf("exit %d, stdout %q, stderr %q: want ENFILE past max-open, then files open again", r.code, r.stdout, r.stderr)
		}
		t.Logf("opens refused past max-open=2500: %s of 1500", lines[0])
		e2fsck(t, vol)
		checkClean(t, tmp)
	})
}
