package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// orphanScript makes a session whose process group is orphaned from the
// start (its leader's parent is in another session), stops one member (A)
// and lets another (B, a child of the leader, so never the group's link to
// the outside) exit. $1 is the busybox to call applets through ("" where
// they are on $PATH, as in the test image).
const orphanScript = `
bb=$1
$bb setsid $bb sh -c '
bb=$1
$bb sh -c "kill -STOP \$\$; echo A-continued" &
a=$!
$bb sleep 0.3
$bb sh -c "exit 0"
$bb sleep 0.3
if kill -0 $a 2>/dev/null; then echo "A alive"; else echo "A dead"; fi
kill -CONT $a; wait $a; echo "A exit $?"
echo "leader alive"
' sh "$bb"
echo "setsid exit $?"
`

// TestOrphanedGroupSignals: the kernel sends SIGHUP and SIGCONT to a
// process group with a stopped member only when an exit makes the group
// orphaned (the exiting process was its last link to a parent in another
// group of the same session: kill_orphaned_pgrp in kernel/exit.c), not at
// every exit in a group that was orphaned already. gVisor sent them at
// every exit, so one child's exit killed its stopped sibling and their
// session leader (no SIGHUP handler). Nested, that killed the inner
// Sentry's systrap stubs (a stub stops itself while it is set up, and the
// stubs share the Sentry's orphaned group), and the inner Sentry waited
// for ever for a dead stub's reply (the CI hang of 9c68c9c in
// TestNestedDocker). Needs gVisor patch 0012-orphaned-pgrp-signals; the
// episode must agree with the host kernel, in both isolations.
func TestOrphanedGroupSignals(t *testing.T) {
	need(t, asRoot)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("no /bin/busybox (apt-get install busybox-static)")
	}
	needPatch(t, "0012-orphaned-pgrp-signals")
	host, err := exec.Command("/bin/busybox", "sh", "-c", orphanScript, "sh", "/bin/busybox").CombinedOutput()
	want := "A alive\nA-continued\nA exit 0\nleader alive\nsetsid exit 0"
	if err != nil || strings.TrimSpace(string(host)) != want {
		t.Fatalf("on the host: %v\n%s\nthe test expects:\n%s", err, host, want)
	}
	isolations(t, asRoot, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asRoot)
		r := runRungv(t, asRoot, tmp, "", "run", "--rm", "--isolation", iso, imageRef, "sh", "-c", orphanScript, "sh", "")
		if got := strings.TrimSpace(r.stdout); r.code != 0 || got != want {
			t.Fatalf("the episode disagrees with the host kernel: exit %d\nhost:\n%s\nepisode:\n%s\n%s", r.code, want, got, tail(r.stderr))
		}
	})
}
