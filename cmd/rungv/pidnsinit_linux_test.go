package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"z.gfire.dev/gvx/runtime/runtimetest"
)

// pidnsInitScript starts, for each case, a process that is PID 1 of a new
// PID namespace with no signal handler (busybox sleep, exec'd by sh, after
// sh has started the case's in-namespace sender), signals it, and prints
// "case alive" or "case dead". $1 is the busybox to call applets through
// ("" where they are on $PATH, as in the test image).
const pidnsInitScript = `
bb=$1
start() { # $1: commands sh runs in the new namespace before exec'ing the init
	$bb unshare -p -f $bb sh -c "$1 exec $bb sleep 1000" &
	u=$!
	c=
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
		for s in /proc/[0-9]*/status; do
			if grep -q "^PPid:[[:space:]]*$u\$" "$s" 2>/dev/null; then c=${s#/proc/}; c=${c%/status}; fi
		done
		[ -n "$c" ] && break
		$bb sleep 0.1
	done
	$bb sleep 0.5 # sh has exec'd the init
}
verdict() { # $1: case name
	$bb sleep 1
	if $bb kill -0 "$c" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' /proc/$c/status 2>/dev/null; then
		echo "$1 alive"
	else
		echo "$1 dead"
	fi
	$bb kill -KILL "$c" 2>/dev/null
	wait $u 2>/dev/null
}
for sig in TERM INT HUP USR1 KILL; do
	start ""; $bb kill -$sig "$c"; verdict "parent-$sig"
done
for sig in TERM INT HUP KILL STOP; do
	start "($bb sleep 0.2; $bb kill -$sig 1) &"; verdict "inside-$sig"
done
# An init with a handler gets the signal (and exits).
$bb unshare -p -f $bb sh -c 'trap "exit 7" TERM; while :; do '"$bb"' sleep 0.1; done' &
u=$!
$bb sleep 1
c=
for s in /proc/[0-9]*/status; do
	if grep -q "^PPid:[[:space:]]*$u\$" "$s" 2>/dev/null; then c=${s#/proc/}; c=${c%/status}; fi
done
$bb kill -TERM "$c"; verdict "handler-TERM"
echo done
`

// TestPIDNSInitSignals is issue 30's matrix: the init of a child PID
// namespace, without handlers, survives TERM/INT/HUP/USR1 from its parent
// namespace and TERM/INT/HUP/KILL/STOP from inside it, SIGKILL from the
// parent kills it, and a signal it handles is delivered: on the host
// kernel and inside an episode, which must agree. It needs
// 0001-pidns-init-signals (patches/gvisor) and skips, saying so, when
// rungv was built without it (plain go build).
func TestPIDNSInitSignals(t *testing.T) {
	need(t, asRoot)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("no /bin/busybox (apt-get install busybox-static)")
	}
	needPatch(t, "0001-pidns-init-signals")

	host, err := exec.Command("/bin/busybox", "sh", "-c", pidnsInitScript, "sh", "/bin/busybox").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(host)), "done") {
		t.Fatalf("on the host: %v\n%s", err, host)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(host)), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			want[k] = v
		}
	}
	// The kernel's answers, as signal(7) and pid_namespaces(7) say.
	for k, v := range map[string]string{"parent-TERM": "alive", "parent-INT": "alive", "parent-HUP": "alive", "parent-USR1": "alive", "parent-KILL": "dead",
		"inside-TERM": "alive", "inside-INT": "alive", "inside-HUP": "alive", "inside-KILL": "alive", "inside-STOP": "alive", "handler-TERM": "dead"} {
		if want[k] != v {
			t.Fatalf("the host kernel says %s %q, the test expects %q:\n%s", k, want[k], v, host)
		}
	}

	tmp := privateTmp(t, asRoot)
	r := runRungv(t, asRoot, tmp, "", "run", "--rm", "--privileged", imageRef, "sh", "-c", pidnsInitScript, "sh", "")
	if r.code != 0 {
		t.Fatalf("in the episode: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got := strings.TrimSpace(r.stdout)
	if got != strings.TrimSpace(string(host)) {
		t.Fatalf("the episode disagrees with the host kernel:\nhost:\n%s\nepisode:\n%s\n%s", host, got, r.stderr)
	}
	t.Logf("host and episode agree:\n%s", got)
}

// needPatch skips t when rungv lacks gVisor patch name
// (runtimetest.NeedPatch).
func needPatch(t *testing.T, name string) {
	t.Helper()
	runtimetest.NeedPatch(t, rungvBin, name)
}
