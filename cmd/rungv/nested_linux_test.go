package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
)

// Nested episodes: rungv inside a rungv episode (issue 28). The outer
// episode is this package's rungv; its guest gets rungv, the nestedprobe
// guest program and the test image as a tar on stdin (a seccomp-only
// episode has no bind mounts) and an ext4lite volume at /v for the inner
// volumes, then runs rungv again, as a user inside gVisor would. Each test
// needs gVisor patch 0004-nested-fault-access: without it every inner
// guest program dies of SIGSEGV at its first demand fault (and rungv run
// inside gVisor refuses, naming the patch).

// nestedTar is a tar of rungv, the nestedprobe guest program
// (testdata/nestedprobe, static) and the test image, for the outer
// guest's stdin.
func nestedTar(t *testing.T) string {
	t.Helper()
	dir := nestedDir(t)
	tar, err := exec.Command("tar", "-C", dir, "-cf", "-", "rungv", "nestedprobe", "image").Output()
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	return string(tar)
}

// needNested skips t unless it runs as root and this build has patch
// 0004-nested-fault-access and the other patches named, and returns
// nestedTar.
func needNested(t *testing.T, patches ...string) string {
	t.Helper()
	need(t, asRoot)
	for _, p := range append([]string{"0004-nested-fault-access"}, patches...) {
		needPatch(t, p)
	}
	return nestedTar(t)
}

// nestedDir is a directory holding what nestedTar packs: rungv, nestedprobe
// and image.
func nestedDir(t *testing.T) string {
	t.Helper()
	probe := guestProgram(t, "nestedprobe")
	dir := filepath.Dir(probe)
	if out, err := exec.Command("cp", rungvBin, filepath.Join(dir, "rungv")).CombinedOutput(); err != nil {
		t.Fatalf("cp rungv: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", "-a", strings.TrimPrefix(imageRef, "oci:"), filepath.Join(dir, "image")).CombinedOutput(); err != nil {
		t.Fatalf("cp image: %v\n%s", err, out)
	}
	return dir
}

// nestedEnv follows the unpacking of /x in every outer script: the inner
// rungv's state and cache in the outer guest's /tmp, and lim, the one way
// a script runs an inner episode: `lim SECONDS CMD...` runs CMD with a
// time limit and, when the limit ends it, says so on stderr ("inner
// episode killed at its time limit", which nestedKnownOpen reads). Each
// limit is well inside boundedCommand's 10 minutes, so that a stuck inner
// episode still leaves the outer's output to read (the CI run of 9c68c9c
// lost it: the outer was killed at 10 minutes).
const nestedEnv = `export TMPDIR=/tmp GVX_CACHE_DIR=/tmp/gvx-cache PATH=/bin:/x; cd /tmp
lim() {
	s=$1; shift; t0=$(date +%s)
	timeout -k 10 "$s" "$@"; rc=$?
	[ $(($(date +%s) - t0)) -lt "$s" ] || echo "inner episode killed at its time limit ($s s, exit $rc): ${1-} ${2-} ${3-} ..." >&2
	return $rc
}
`

// nestedRun runs script with sh in an outer episode of the given isolation
// with nestedTar unpacked at /x, nestedEnv set and the ext4lite volume
// outerVol at /v.
func nestedRun(t *testing.T, isolation, tar, outerVol, script string) result {
	t.Helper()
	tmp := privateTmp(t, asRoot)
	pre := "set -u; mkdir /x && tar -xf - -C /x || exit 97\n" + nestedEnv
	return runRungv(t, asRoot, tmp, tar, "run", "--rm", "--isolation", isolation,
		"--mount", "type=volume,src="+outerVol+",dst=/v", imageRef, "sh", "-c", pre+script)
}

// innerVolume copies the file name of the ext4lite volume outer (an inner
// episode's volume file) to the host, for e2fsck and volumeMD5.
func innerVolume(t *testing.T, outer, name string) string {
	t.Helper()
	v, err := ext4lite.Open(outer, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	f, err := v.Open(name)
	if err != nil {
		t.Fatalf("%s in %s: %v", name, outer, err)
	}
	defer f.Close()
	p := filepath.Join(privateTmp(t, asRoot), "inner.ext4")
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, f); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNestedEpisode: rungv runs episodes inside a rungv episode whose
// isolation is seccomp-only or namespaces: the inner guest echoes, writes
// 10 MiB to a volume that a second inner episode reads back (and e2fsck
// finds clean on the host afterwards), serves a port published with
// -p unix: that the outer guest (outside the inner episode) reaches, and
// with --network nat fetches a page from a server on the outer guest's
// loopback (10.0.2.2, --allow-host-port).
func TestNestedEpisode(t *testing.T) {
	tar := needNested(t)
	isolations(t, asRoot, func(t *testing.T, iso string) {
		outer := newVolume(t, asRoot, 512<<20)
		// Every inner episode has a time limit (90 s; one takes 2-15 s
		// on a loaded 2-CPU VM): one that hangs stops its step, named,
		// instead of the whole test.
		script := `
rungv info --json | grep -o '"nested_mode":[^}]*}' || true
echo "== echo"
lim 90 rungv run --rm --network none oci:/x/image echo nested-echo || echo "inner echo: exit $?"
echo "== volume"
lim 90 rungv run --rm --network none --mount type=volume,src=/v/inner.ext4,dst=/data,size=64M oci:/x/image \
sh -c 'dd if=/dev/urandom of=/data/f bs=1M count=10 2>/dev/null && md5sum /data/f | cut -c1-32 && sync' || echo "inner write: exit $?"
lim 90 rungv run --rm --network none --mount type=volume,src=/v/inner.ext4,dst=/data,size=64M oci:/x/image \
sh -c 'wc -c < /data/f; md5sum /data/f | cut -c1-32' || echo "inner read: exit $?"
echo "== publish"
lim 90 rungv run --rm -p unix:/tmp/web.sock:8080 oci:/x/image \
sh -c 'mkdir /www && echo nested-pong > /www/index.html && exec httpd -f -p 8080 -h /www' > /tmp/inner.out 2>&1 &
inner=$!
for i in $(seq 1 120); do
[ -S /tmp/web.sock ] && nestedprobe dial /tmp/web.sock 'GET /index.html HTTP/1.0

' > /tmp/reply 2>/dev/null && grep -q nested-pong /tmp/reply && break
sleep 0.5
done
grep nested-pong /tmp/reply || { echo "no reply through -p unix:"; cat /tmp/reply /tmp/inner.out; }
kill $inner; wait $inner
echo "== nat"
mkdir -p /www && echo nested-nat-pong > /www/index.html
httpd -f -p 127.0.0.1:18080 -h /www &
web=$!
lim 90 rungv run --rm --network nat --allow-host-port 18080 oci:/x/image wget -qO- http://10.0.2.2:18080/index.html || echo "inner nat: exit $?"
kill $web; wait $web
echo "== done"
`
		r := nestedRun(t, iso, tar, outer, script)
		t.Logf("outer (%s): exit %d\n%s\n%s", iso, r.code, r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("outer episode: exit %d", r.code)
		}
		sections := outputSections(r.stdout)
		// Known open (issue 28), two ways an inner step can stop
		// that are not this test's to judge: an inner episode now and
		// then does not end after its guest did (the CI run of 891cb89
		// waited 40 minutes in the inner echo of a seccomp-only outer;
		// here 3 runs in 6 had one, in either outer), and nested, a multi-threaded Go program (the inner
		// rungv's port relay, a guest of the inner sandbox) now and
		// then gets a system call result that is not its own
		// ("futexwakeup ... returned -9", "epollwait on fd 7 failed
		// with 22"; single-threaded busybox is not hit). A step
		// stopped so is skipped, named; every check of what did run
		// (the volumes' fsck, the file's bytes on the host) still
		// applies, and a run where every step stops fails.
		hung := strings.Contains(r.stderr, "killed at its time limit")
		var open []string
		stopped := func(known bool, format string, args ...any) {
			t.Helper()
			if known {
				open = append(open, fmt.Sprintf(format, args...))
			} else {
				t.Errorf(format, args...)
			}
		}
		if got := sections["echo"]; len(got) != 1 || got[0] != "nested-echo" {
			stopped(hung, "inner echo: %q", got)
		}
		md5 := regexp.MustCompile(`^[0-9a-f]{32}$`)
		v := sections["volume"]
		if len(v) != 3 || !md5.MatchString(v[0]) || strings.TrimSpace(v[1]) != "10485760" || v[2] != v[0] {
			stopped(hung, "inner volume: wrote then read %q; want an md5, 10485760 and the same md5", v)
		}
		e2fsck(t, outer)
		vol := innerVolume(t, outer, "inner.ext4")
		e2fsck(t, vol)
		if len(v) == 3 && md5.MatchString(v[0]) {
			if got := volumeMD5(t, vol, "f"); got != v[0] {
				t.Errorf("on the host the inner volume's file has md5 %s, the inner guest wrote %s", got, v[0])
			}
		}
		if got := sections["publish"]; len(got) != 1 || got[0] != "nested-pong" {
			stopped(hung || relayCrashed(r.stdout), "inner -p unix: the outer guest got %.300q", got)
		}
		// --network nat: the inner guest reaches a server of the outer
		// guest's loopback through the inner NAT's host side (10.0.2.2,
		// the one port allowed).
		if got := sections["nat"]; len(got) != 1 || got[0] != "nested-nat-pong" {
			stopped(hung, "inner --network nat: the inner guest got %.300q from the outer guest's server", got)
		}
		if len(open) == 4 {
			t.Errorf("every nested step stopped: nested mode does not work at all here")
		}
		if len(open) > 0 {
			defer t.Skipf("known open (issue 28), nested steps stopped by an inner hang or a wrong system call result: %s", strings.Join(open, "; "))
		}
		if _, ok := sections["done"]; !ok && !strings.Contains(r.stdout, "== done") {
			t.Errorf("the outer script did not finish")
		}
	})
}

// outputSections splits a nested script's output into its "== NAME"
// sections: the non-empty lines after each header, by name.
func outputSections(out string) map[string][]string {
	sections := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "== ") {
			cur = strings.TrimPrefix(l, "== ")
			continue
		}
		if l != "" {
			sections[cur] = append(sections[cur], l)
		}
	}
	return sections
}

// relayCrashed says whether out holds the Go runtime's report of a relay
// that died of a system call result the kernel never gives for that call
// (FUTEX_WAKE failing with EBADF, epoll_wait with EINVAL on its own epoll
// descriptor).
func relayCrashed(out string) bool {
	return strings.Contains(out, "runtime: netpoll failed") ||
		strings.Contains(out, "epollwait on fd") ||
		futexWakeupFailed.MatchString(out)
}

// futexWakeupFailed is the Go runtime's report of a FUTEX_WAKE that
// returned an error.
var futexWakeupFailed = regexp.MustCompile(`futexwakeup addr=0x[0-9a-f]+ returned -`)

// nestedKnownOpen names the known-open nested failure (issue 28) that out
// shows, or returns "": an inner episode killed at its time limit, or the
// Go runtime's report of a crash that the inner Sentry's system call or
// fault handling caused.
func nestedKnownOpen(out string) string {
	switch {
	case strings.Contains(out, "killed at its time limit"):
		return "the inner episode did not end in time"
	case relayCrashed(out):
		return "a Go program got a system call result that is not its own"
	case strings.Contains(out, "Failed to decommit") || strings.Contains(out, "unexpected fault address") || strings.Contains(out, "unexpected signal during runtime execution"):
		return "a Go program died of a fault nested mode does not serve"
	}
	return ""
}

// TestNestedFaultViolations: in nested mode, where page faults come without
// an error code and the inner Sentry infers the access, a guest's real
// access violations still end in SIGSEGV: a read of an unmapped page, a
// write to a read-only page and a jump into a non-executable page (the
// probe prints "survived" if the access went through), each delivered to
// the guest's own handler with Linux's si_code (Go's report, exit 2);
// legitimate demand faults (read then write of fresh pages, copy on write
// of a private file mapping, code in a page made executable) are served.
func TestNestedFaultViolations(t *testing.T) {
	tar := needNested(t)
	outer := newVolume(t, asRoot, 64<<20)
	script := `
lim 90 rungv run --rm --network none oci:/x/image sh -c '
cat > /tmp/nestedprobe && chmod +x /tmp/nestedprobe || exit 96
/tmp/nestedprobe ok; echo "ok exit $?"
for c in unmapped rowrite noexec; do
	echo "== $c"
	/tmp/nestedprobe $c 2>&1
	echo "$c exit $?"
done' < /x/nestedprobe
echo "inner exit $?"
`
	r := nestedRun(t, "seccomp-only", tar, outer, script)
	t.Logf("outer: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	// Known open (issue 28, TestNestedEpisode): now and then an inner
	// episode does not end and is killed at its limit. The cases that
	// ran are still judged; the hang itself is reported as a skip.
	hung := strings.Contains(r.stderr, "killed at its time limit")
	if r.code != 0 || (!hung && !strings.Contains(r.stdout, "inner exit 0")) {
		t.Fatalf("outer or inner episode failed: exit %d", r.code)
	}
	if hung {
		defer t.Skipf("the inner episode was killed at its time limit (known open, issue 28)")
	}
	if !strings.Contains(r.stdout, "ok 0 7\nok exit 0\n") && !(hung && !strings.Contains(r.stdout, "ok exit")) {
		t.Errorf("legitimate faults: want \"ok 0 7\" and exit 0")
	}
	parts := strings.Split(r.stdout, "== ")
	for _, c := range []struct{ name, code string }{{"unmapped", "code=0x1"}, {"rowrite", "code=0x2"}, {"noexec", "code=0x2"}} {
		var out string
		for _, p := range parts {
			if strings.HasPrefix(p, c.name+"\n") {
				out = p
			}
		}
		goReport := strings.Contains(out, "unexpected fault address") && strings.Contains(out, "signal SIGSEGV") && strings.Contains(out, c.name+" exit 2")
		switch {
		case hung && !strings.Contains(out, c.name+" exit"):
			// stopped before this case ended
		case out == "":
			t.Errorf("%s: no output", c.name)
		case strings.Contains(out, "survived"):
			t.Errorf("%s: the guest's access was let through:\n%s", c.name, out)
		case !goReport:
			// Before patch 0015 the probe's later runs died of SIGSEGV
			// without their handler running (exit 139): their code
			// carried the outer's syscall patches (TestNestedRunTwice).
			t.Errorf("%s: want SIGSEGV delivered to the guest's handler (Go's report and exit 2), as on Linux:\n%s", c.name, out)
		case !strings.Contains(out, c.code):
			t.Errorf("%s: want si_code %s (as on Linux):\n%s", c.name, c.code, out)
		}
	}
}

// nestedProbe runs body with sh in one inner episode (a time limit of
// limit seconds) inside an outer episode of isolation iso, with the
// nestedprobe guest program at /tmp/p, and returns the outer's output. It
// fails t unless both episodes exit 0, or skips it naming a known-open
// stop (nestedKnownOpen). body must not hold a single quote.
func nestedProbe(t *testing.T, iso, tar string, limit int, body string) result {
	t.Helper()
	outer := newVolume(t, asRoot, 64<<20)
	script := fmt.Sprintf(`
lim %d rungv run --rm --network none oci:/x/image sh -c '
cat > /tmp/p && chmod +x /tmp/p || exit 96
%s' < /x/nestedprobe
echo "inner exit $?"
`, limit, body)
	r := nestedRun(t, iso, tar, outer, script)
	t.Logf("outer (%s): exit %d\n%s\n%s", iso, r.code, r.stdout, tail(r.stderr))
	if r.code != 0 || !strings.Contains(r.stdout, "inner exit 0") {
		if why := nestedKnownOpen(r.stdout + r.stderr); r.code == 0 && why != "" {
			t.Skipf("known open (issue 28), an inner episode stopped: %s", why)
		}
		t.Fatalf("outer or inner episode failed: exit %d", r.code)
	}
	return r
}

// TestNestedSyscalls: in an episode inside an episode (seccomp-only and
// namespaces outer; each probe in an inner episode of its own), many
// threads' system calls get their own answers: 16
// threads make futex(FUTEX_WAKE_PRIVATE) calls (answer 0) and lseek calls to
// a known offset (answer: that offset) and nestedprobe prints every wrong
// one, and a Go program's goroutine churn (the runtime's futex traffic and
// preemption signals) survives. Without gVisor patch 0010-nested-stray-sigsys
// the outer Sentry's SIGSYS for one thread's trapped call was taken by
// another: futex "returned" 202 (its own number) or -EBADF (another
// thread ran read(2) with futex's arguments), lseek returned 8, and Go's
// runtime died in futexwakeup, as containerd did.
func TestNestedSyscalls(t *testing.T) {
	tar := needNested(t, "0010-nested-stray-sigsys")
	isolations(t, asRoot, func(t *testing.T, iso string) {
		// Both probes in one inner episode, one after the other: before
		// patch 0015 the second died at its start (TestNestedRunTwice).
		r := nestedProbe(t, iso, tar, 150, `for c in syscalls churn; do /tmp/p $c > /tmp/out 2>&1; echo "$c exit $?"; tail -20 /tmp/out; done`)
		if !regexp.MustCompile(`(?m)^syscalls 96000 bad 0$`).MatchString(r.stdout) {
			t.Errorf("system calls in 16 threads: want \"syscalls 96000 bad 0\" (every answer right)")
		}
		if !strings.Contains(r.stdout, "churn exit 0\nchurn true\n") {
			t.Errorf("goroutine churn after the syscalls probe: want \"churn exit 0\" and \"churn true\" (the Go runtime survived)")
		}
	})
}

// TestNestedRunTwice (gVisor patch 0015-nested-private-code): in an episode
// inside an episode (both outer isolations), a Go program runs three times
// and every run passes, and its file's bytes are the same after the runs.
// Without the patch the outer Sentry's syscall patching wrote into the
// inner Sentry's memory file through the stub's shared mapping of the
// program's code: the file changed (md5sum) and every run after the
// first jumped to address 0 and died of SIGSEGV within milliseconds.
func TestNestedRunTwice(t *testing.T) {
	tar := needNested(t, "0015-nested-private-code")
	isolations(t, asRoot, func(t *testing.T, iso string) {
		r := nestedProbe(t, iso, tar, 90, `md5sum < /tmp/p
for i in 1 2 3; do /tmp/p ok > /tmp/out 2>&1; echo "run $i exit $?"; done
md5sum < /tmp/p`)
		sums := regexp.MustCompile(`(?m)^([0-9a-f]{32})  -$`).FindAllStringSubmatch(r.stdout, -1)
		if len(sums) != 2 || sums[0][1] != sums[1][1] {
			t.Errorf("the program's md5 before and after its runs: %q; want two, the same (running it must not write into its file)", sums)
		}
		for i := 1; i <= 3; i++ {
			if want := fmt.Sprintf("run %d exit 0\n", i); !strings.Contains(r.stdout, want) {
				t.Errorf("want %q: every run of the program passes, not only the first", want)
			}
		}
	})
}
