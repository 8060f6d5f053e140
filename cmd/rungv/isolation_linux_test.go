package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/runtime/runtimetest"
)

// --isolation seccomp-only: the sandbox started directly, with no
// namespace (what auto picks in an unprivileged container or pod). The
// same guarantees as the namespace path, tried as root and as nobody on
// this host: exit codes, a 100 MiB volume read back on the host, a
// published port, NAT, lockdown of every process, nothing left behind.

func seccompOnly(args ...string) []string {
	return append([]string{"run", "--isolation", "seccomp-only"}, args...)
}

// TestSeccompOnlyRun: stdout, the exit code, and the mode in --json.
func TestSeccompOnlyRun(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", seccompOnly("--json", "--network", "none", imageRef, "sh", "-c", "echo out; id -u; exit 7")...)
		if r.code != 7 || r.stdout != "out\n0\n" {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		var start struct {
			Event, Isolation string
		}
		if err := json.Unmarshal([]byte(strings.SplitN(r.stderr, "\n", 2)[0]), &start); err != nil || start.Event != "start" || start.Isolation != "seccomp-only" {
			t.Fatalf("start event %+v (%v) in %q", start, err, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// TestSeccompOnlyVolume: 100 MiB written in the guest are in the volume
// file afterwards (ext4lite on the host reads them back) and e2fsck finds
// it clean: the volume is served by rungv's own process, without a gofer.
func TestSeccompOnlyVolume(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		vol := newVolume(t, u, 1<<30)
		script := `set -e
dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null
md5sum /data/big | cut -d' ' -f1
mkdir -p /data/d && echo hi > /data/d/f && chown 1000:50 /data/d/f && ln -s d/f /data/l`
		r := runRungv(t, u, tmp, "", seccompOnly("--network", "none", "--mount", "type=volume,src="+vol+",dst=/data", imageRef, "sh", "-c", script)...)
		if r.code != 0 || len(strings.TrimSpace(r.stdout)) != 32 {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
		if got := volumeMD5(t, vol, "big"); got != strings.TrimSpace(r.stdout) {
			t.Fatalf("md5 in the volume %s, guest saw %s", got, r.stdout)
		}
		v, err := ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if h, err := v.Lstat("d/f"); err != nil || h.UID != 1000 || h.GID != 50 {
			t.Fatalf("d/f: %+v %v", h, err)
		}
		if l, err := v.Readlink("l"); err != nil || l != "d/f" {
			t.Fatalf("l: %q %v", l, err)
		}
	})
}

// TestSeccompOnlyPublishAndNAT: a guest web server answers through a
// published unix socket, and the guest fetches from a host server on
// loopback through the NAT (its port allowed).
func TestSeccompOnlyPublishAndNAT(t *testing.T) {
	body := randomBytes(t, 3<<20+17)
	port := hostHTTP(t, body)
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		sock := filepath.Join(privateTmp(t, u), "web.sock")
		script := `set -e
mkdir -p /www
wget -qO /www/blob http://10.0.2.2:` + strconv.Itoa(port) + `/blob
httpd -p 127.0.0.1:8080 -h /www
echo ready
sleep 60`
		c := command(t, u, tmp, seccompOnly("-p", "unix:"+sock+":8080", "--allow-host-port", strconv.Itoa(port), imageRef, "sh", "-c", script)...)
		line, stderr := startLines(t, c)
		if got := line(); got != "ready" {
			t.Fatalf("guest: %q; stderr %s", got, stderr.String())
		}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return net.Dial("unix", sock)
		}}}
		resp, err := hc.Get("http://guest/blob")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("through NAT and back: %d bytes (want %d), err %v", len(got), len(body), err)
		}
		c.Process.Signal(os.Interrupt)
		_ = c.Wait()
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Fatalf("published socket left: %v", err)
		}
		checkClean(t, tmp)
	})
}

// TestSeccompOnlyLockedDown: while the guest runs, the host side and the
// sandbox process both run with no_new_privs and a seccomp filter, and
// the sandbox is confined to the caller's uid; an attempt to mount a host
// directory is refused before anything starts.
func TestSeccompOnlyLockedDown(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, seccompOnly("--network", "none", imageRef, "sh", "-c", "echo up; sleep 30")...)
		line, stderr := startLines(t, c)
		if got := line(); got != "up" {
			t.Fatalf("guest: %q; stderr %s", got, stderr.String())
		}
		procs := processesMentioning(tmp)
		var sandbox int
		for _, p := range procs {
			if strings.Contains(p, "runsc-sandbox") && strings.Contains(p, " boot ") {
				sandbox, _ = strconv.Atoi(strings.Fields(p)[0])
			}
		}
		if sandbox == 0 {
			t.Fatalf("no sandbox among %q", procs)
		}
		host := parentOf(t, sandbox)
		if cl, _ := os.ReadFile("/proc/" + strconv.Itoa(host) + "/cmdline"); !bytes.Contains(cl, []byte("seccomp-only")) {
			t.Fatalf("the sandbox's parent %d is not rungv run: %q", host, cl)
		}
		for name, pid := range map[string]int{"host side": host, "sandbox": sandbox} {
			st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
				if !bytes.Contains(st, []byte(want)) {
					t.Errorf("%s (pid %d) lacks %q", name, pid, want)
				}
			}
			if u.name == "nobody" && !bytes.Contains(st, []byte("Uid:\t65534\t65534\t65534\t65534")) {
				t.Errorf("%s (pid %d) is not nobody:\n%s", name, pid, st)
			}
		}
		// As root too, the sandbox holds no capability and cannot get one
		// back by an exec (bounding and inheritable sets empty): it runs as
		// uid 0 in the caller's namespaces, and the same sandbox runs as
		// nobody with none. It kept the caller's full set before.
		// (Without CAP_SETPCAP, nobody's bounding set stays full; with
		// no_new_privs an exec as nobody gains nothing from it.)
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(sandbox) + "/status")
		sets := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
		if u.name == "root" {
			sets = append(sets, "CapBnd")
		}
		for _, set := range sets {
			if want := set + ":\t0000000000000000\n"; !bytes.Contains(st, []byte(want)) {
				t.Errorf("the sandbox (pid %d) holds capabilities: want %q in\n%s", sandbox, want, st)
			}
		}
		c.Process.Signal(os.Interrupt)
		_ = c.Wait()
		checkClean(t, tmp)

		dir := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", seccompOnly("--network", "none", "--mount", "type=bind,src="+dir+",dst=/host", imageRef, "true")...)
		if r.code != 125 || !strings.Contains(r.stderr, "gofer") || !strings.Contains(r.stderr, "/host") {
			t.Fatalf("bind mount: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// TestIsolationAuto: auto is the namespace path where the host lets this
// user make the namespaces (CI's, TestNamespaceProbeAgrees checks the probe
// against unshare(1)) and seccomp-only where it refuses them, and
// --isolation refuses a typo as a usage error.
func TestIsolationAuto(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		probe, err := runtimetest.ProbeNamespaces(rungvBin, u.wrap...)
		if err != nil {
			t.Fatal(err)
		}
		r := runRungv(t, u, tmp, "", "run", "--json", "--network", "none", imageRef, "true")
		if r.code != 0 || !strings.Contains(r.stderr, `"isolation":"`+probe.Mode+`"`) {
			t.Fatalf("the probe says %s (%s); exit %d stderr %q", probe.Mode, probe.Why, r.code, r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--isolation", "chroot", imageRef, "true")
		if r.code != 2 || !strings.Contains(r.stderr, "isolation") {
			t.Fatalf("--isolation chroot: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

// parentOf is pid's parent.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no PPid for %d", pid)
	return 0
}

// TestSeccompOnlyKillLeavesNothing: SIGKILL of rungv (no cleanup runs)
// takes the sandbox with it (PDEATHSIG: there is no PID namespace to
// end), and the next start sweeps the state directory and the socket.
func TestSeccompOnlyKillLeavesNothing(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		sock := filepath.Join(privateTmp(t, u), "ep.sock")
		c := command(t, u, tmp, seccompOnly("--network", "none", "-e", "SECRET_TOKEN=hunter2", "-p", "unix:"+sock+":2375", imageRef, "sh", "-c", "echo started; exec sleep 1000")...)
		line, _ := startLines(t, c)
		if s := line(); s != "started" {
			t.Fatalf("guest did not start: %q", s)
		}
		c.Process.Kill()
		c.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for len(processesMentioning(tmp)) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if p := processesMentioning(tmp); len(p) > 0 {
			t.Fatalf("processes outlived a SIGKILLed rungv: %v", p)
		}
		if r := runRungv(t, u, tmp, "", seccompOnly("--network", "none", imageRef, "true")...); r.code != 0 {
			t.Fatalf("next start: exit %d, stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the next start: %v", sock, err)
		}
	})
}

// TestStopTimeoutBothModes: in both isolation modes SIGTERM reaches the
// guest (its trap's exit code comes back), and a guest that ignores
// SIGTERM does not outlive the stop timeout (10 s, as docker stop): it
// is killed and leaves nothing.
func TestStopTimeoutBothModes(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		isolations(t, u, func(t *testing.T, iso string) {
			tmp := privateTmp(t, u)
			c := command(t, u, tmp, "run", "--isolation", iso, "--network", "none", imageRef, "sh", "-c",
				"trap 'echo got-term; exit 3' TERM; echo started; while :; do sleep 0.1; done")
			line, _ := startLines(t, c)
			if s := line(); s != "started" {
				t.Fatalf("guest did not start: %q", s)
			}
			_ = c.Process.Signal(syscall.SIGTERM)
			got := line()
			if err := c.Wait(); got != "got-term" || c.ProcessState.ExitCode() != 3 {
				t.Fatalf("after SIGTERM: output %q, wait %v; want got-term and exit 3", got, err)
			}
			checkClean(t, tmp)

			c = command(t, u, tmp, "run", "--isolation", iso, "--network", "none", imageRef, "sh", "-c",
				"trap '' TERM INT; echo started; while :; do sleep 0.1; done")
			line, _ = startLines(t, c)
			if s := line(); s != "started" {
				t.Fatalf("guest did not start: %q", s)
			}
			start := time.Now()
			_ = c.Process.Signal(syscall.SIGTERM)
			// Without a stop timeout this would wait forever: fail instead.
			watchdog := time.AfterFunc(30*time.Second, func() { c.Process.Kill() })
			_ = c.Wait()
			watchdog.Stop()
			took := time.Since(start)
			if code := c.ProcessState.ExitCode(); code != 137 || took > 30*time.Second {
				t.Fatalf("a guest ignoring SIGTERM: exit %d after %v; want 137 (killed) after the stop timeout", code, took)
			}
			t.Logf("killed %v after SIGTERM", took.Round(100*time.Millisecond))
			checkClean(t, tmp)
		})
	})
}

// isolations runs f as a subtest for each isolation rungv has, namespaces
// and seccomp-only; the namespaces one skips, saying why, where u cannot
// make namespaces.
func isolations(t *testing.T, u user, f func(t *testing.T, iso string)) {
	t.Helper()
	for _, iso := range []string{"namespaces", "seccomp-only"} {
		t.Run(iso, func(t *testing.T) {
			if iso == "namespaces" {
				needNamespaces(t, u)
			}
			f(t, iso)
		})
	}
}
