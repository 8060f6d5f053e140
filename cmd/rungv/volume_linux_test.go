package main

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// newVolume creates an empty ext4lite volume u can write.
func newVolume(t *testing.T, u user, size int64) string {
	t.Helper()
	dir := privateTmp(t, u)
	p := filepath.Join(dir, "vol.ext4")
	v, err := ext4lite.Create(p, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if u.name == "nobody" {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// e2fsck checks the volume with e2fsprogs, the real peer.
func e2fsck(t *testing.T, p string) {
	t.Helper()
	bin, err := exec.LookPath("e2fsck")
	if err != nil {
		t.Log("e2fsck (e2fsprogs) is missing: skipping the cross-check")
		return
	}
	if out, err := exec.Command(bin, "-fn", p).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn: %v\n%s", err, out)
	}
}

// volumeMD5 is the md5 of the file at name in the ext4lite volume file
// vol, read on the host after the episode.
func volumeMD5(t *testing.T, vol, name string) string {
	t.Helper()
	v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	f, err := v.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return md5Of(t, f)
}

func md5Of(t *testing.T, r io.Reader) string {
	t.Helper()
	h := md5.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestVolume100MiB writes a 100 MiB file and a small tree from the guest
// into an ext4lite volume; after the episode the file is in the volume
// (read back with ext4lite), ownership and links are kept, a file
// unlinked while open is still readable and then freed, and e2fsck finds
// the volume clean.
func TestVolume100MiB(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 1<<30)
		script := `set -e
dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null
md5sum /data/big | cut -d' ' -f1
mkdir -p /data/dir/sub && echo hello > /data/dir/sub/f
ln -s dir/sub/f /data/link && ln /data/dir/sub/f /data/hard
chown 1000:50 /data/dir/sub/f
mv /data/dir/sub /data/dir/moved
mkfifo /data/fifo
rm /data/hard
cat /data/dir/moved/f
echo kept > /data/gone && exec 4</data/gone && rm /data/gone && cat <&4`
		r := runRungv(t, u, tmp, "", "run", "--mount", "type=volume,src="+vol+",dst=/data", imageRef, "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("guest: exit %d stderr %q", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		// "kept": a file unlinked while open stays readable (POSIX).
		if len(lines) != 3 || len(lines[0]) != 32 || lines[1] != "hello" || lines[2] != "kept" {
			t.Fatalf("guest output %q", r.stdout)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)

		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		h, err := v.Lstat("big")
		if err != nil || h.Size != 100<<20 {
			t.Fatalf("big: %+v %v", h, err)
		}
		f, err := v.Open("big")
		if err != nil {
			t.Fatal(err)
		}
		if got := md5Of(t, f); got != lines[0] {
			t.Fatalf("md5 of big in the volume %s, guest saw %s", got, lines[0])
		}
		f.Close()
		h, err = v.Lstat("dir/moved/f")
		if err != nil || h.UID != 1000 || h.GID != 50 || h.Nlink != 1 {
			t.Fatalf("dir/moved/f: %+v %v", h, err)
		}
		if l, err := v.Readlink("link"); err != nil || l != "dir/sub/f" {
			t.Fatalf("link: %q %v", l, err)
		}
		if h, err := v.Lstat("fifo"); err != nil || h.Type() != 0o010000 {
			t.Fatalf("fifo: %+v %v", h, err)
		}
		for _, gone := range []string{"hard", "gone"} {
			if _, err := v.Lstat(gone); err == nil {
				t.Fatalf("%s was removed in the guest but is in the volume", gone)
			}
		}
	})
}

// TestVolumeGracefulStop sends SIGTERM to rungv: the guest's trap runs,
// writes into the volume and exits; the volume is synced and closed.
func TestVolumeGracefulStop(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 256<<20)
		c := command(t, u, tmp, "run", "--mount", "type=volume,src="+vol+",dst=/var/lib/docker", imageRef, "sh", "-c",
			"trap 'echo stopped > /var/lib/docker/state; exit 0' TERM; echo running > /var/lib/docker/state; "+
				"dd if=/dev/urandom of=/var/lib/docker/big bs=1M count=64 2>/dev/null; sync; rm /var/lib/docker/big; "+
				"echo started; while :; do sleep 0.1; done")
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			t.Fatalf("rungv after SIGTERM: %v", err)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
		// The stop trimmed the volume: the 64 MiB written and deleted and
		// the journal's log are punched out of the host file.
		var st unix.Stat_t
		if err := unix.Stat(vol, &st); err != nil {
			t.Fatal(err)
		}
		if alloc := st.Blocks * 512; alloc > 16<<20 {
			t.Errorf("after a graceful stop the volume file takes %d bytes; want it trimmed (< 16 MiB)", alloc)
		} else {
			t.Logf("volume file: %d KiB allocated after the stop", alloc>>10)
		}
		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		f, err := v.Open("state")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		if string(b) != "stopped\n" {
			t.Fatalf("state in the volume = %q, want the trap's", b)
		}
	})
}

// TestVolumeExecAndMmap: programs run from a volume and a file on it is
// memory-mapped, shared and writable. Both need the Sentry to map the
// volume's pages (ENODEV on a shared mount without host FDs): executables
// in images that dockerd unpacks onto its volume, its bolt databases.
func TestVolumeExecAndMmap(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 256<<20)
		// Loading an ELF maps it: /proc/self/maps of the busybox run from
		// the volume names the file there.
		script := `set -e
cp /bin/busybox /data/busybox
/data/busybox echo exec-ok
/data/busybox sh -c 'grep -c /data/busybox /proc/self/maps'`
		r := runRungv(t, u, tmp, "", "run", "--mount", "type=volume,src="+vol+",dst=/data", imageRef, "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("guest: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || lines[0] != "exec-ok" || lines[1] == "0" {
			t.Fatalf("guest output %q", r.stdout)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
	})
}

// TestVolumeUnixSocket: a guest program binds a unix socket on a volume
// and connects to it (dockerd and containerd keep sockets under their
// state directories). The socket lives in the Sentry's memory: nothing is
// written to the volume for it.
func TestVolumeUnixSocket(t *testing.T) {
	bin := filepath.Join(shared, "bin")
	if _, err := os.Stat(filepath.Join(bin, "unixsock")); err != nil {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "unixsock"), "./testdata/unixsock")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		_ = os.Chmod(bin, 0o755)
	}
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 256<<20)
		r := runRungv(t, u, tmp, "", "run", "--mount", "type=volume,src="+vol+",dst=/data",
			"--mount", "type=bind,src="+bin+",dst=/xbin,readonly", imageRef,
			"sh", "-c", "mkdir /data/run && /xbin/unixsock /data/run/s.sock && rm /data/run/s.sock && ls -A /data/run")
		if r.code != 0 || r.stdout != "pong true\n" {
			t.Fatalf("guest: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
	})
}

// TestMountsBindTmpfs: a read-only bind mount and a tmpfs, as docker's.
func TestMountsBindTmpfs(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		host := privateTmp(t, u)
		if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runRungv(t, u, tmp, "", "run",
			"--mount", "type=bind,src="+host+",dst=/in,readonly",
			"--mount", "type=tmpfs,dst=/scratch",
			imageRef, "sh", "-c", "cat /in/in.txt; echo x > /scratch/f && cat /scratch/f; echo no > /in/w || echo ro")
		if r.stdout != "from host\nx\nro\n" {
			t.Fatalf("got %q (stderr %q)", r.stdout, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// TestRmRfSlash: `rm -rf /` in a guest with a volume (a clone of a golden
// volume) and a read-only bind mount leaves the host untouched: the golden
// file's bytes, the bound directory, a file beside them. The clone itself
// is emptied, as it should be, and stays e2fsck-clean.
func TestRmRfSlash(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		golden := newVolume(t, u, 256<<20)
		v, err := ext4lite.Open(golden, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.WriteFile(&sink.Header{Path: "precious", Mode: sink.TypeReg | 0o644, Size: 5}, strings.NewReader("gold\n")); err != nil {
			t.Fatal(err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		sum := func(p string) string {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			return md5Of(t, f)
		}
		goldenSum := sum(golden)
		clone := filepath.Join(filepath.Dir(golden), "clone.ext4")
		if out, err := exec.Command("cp", "--sparse=always", golden, clone).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if u.name == "nobody" {
			_ = os.Chown(clone, 65534, 65534)
		}
		host := privateTmp(t, u)
		if err := os.WriteFile(filepath.Join(host, "keep"), []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		beside := filepath.Join(filepath.Dir(golden), "beside")
		if err := os.WriteFile(beside, []byte("beside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runRungv(t, u, tmp, "", "run", "--network", "none",
			"--mount", "type=volume,src="+clone+",dst=/var/lib/docker",
			"--mount", "type=bind,src="+host+",dst=/host,readonly", imageRef,
			"sh", "-c", "rm -rf / 2>/dev/null; echo survived; [ -e /var/lib/docker/precious ] && echo still-there; exit 0")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "survived" {
			t.Fatalf("guest: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		checkClean(t, tmp)
		if got := sum(golden); got != goldenSum {
			t.Error("the golden volume changed")
		}
		if b, err := os.ReadFile(filepath.Join(host, "keep")); err != nil || string(b) != "host\n" {
			t.Errorf("the read-only bind mount's file: %q, %v", b, err)
		}
		if b, err := os.ReadFile(beside); err != nil || string(b) != "beside\n" {
			t.Errorf("a host file beside the volumes: %q, %v", b, err)
		}
		if _, err := os.Stat(rungvBin); err != nil {
			t.Errorf("the rungv binary: %v", err)
		}
		e2fsck(t, clone)
	})
}

// TestVolumeInUse: while an episode runs on a volume, a second episode
// that wants to write it, and a gvx-vol-style writer (ext4lite.Open), are
// refused; a read-only mount waits for no one but is refused too while a
// writer holds the file. After the first episode, the volume is free.
func TestVolumeInUse(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 128<<20)
		c := command(t, u, tmp, "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d", imageRef,
			"sh", "-c", "echo up; sleep 30")
		line, _ := startLines(t, c)
		if line() != "up" {
			t.Fatal("first episode did not start")
		}
		for _, mnt := range []string{"type=volume,src=" + vol + ",dst=/d", "type=volume,src=" + vol + ",dst=/d,readonly"} {
			r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", mnt, imageRef, "true")
			if r.code != 125 || !strings.Contains(r.stderr, "in use") {
				t.Errorf("second episode (%s): exit %d stderr %q", mnt, r.code, r.stderr)
			}
		}
		if u.name == "root" {
			if _, err := ext4lite.Open(vol, nil); !errors.Is(err, ext4lite.ErrInUse) {
				t.Errorf("ext4lite.Open beside a running episode: %v, want ErrInUse", err)
			}
		}
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		checkClean(t, tmp)
		if r := runRungv(t, u, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+vol+",dst=/d", imageRef, "true"); r.code != 0 {
			t.Fatalf("after the first episode: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
