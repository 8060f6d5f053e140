package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"z.gfire.dev/gvx/runtime/runtimetest"
)

// TestNamespaceProbeAgrees: the probe that lets tests skip (rungv info's,
// through runtimetest.NeedNamespaces) says "namespaces" exactly where the
// user can really make user, network, PID and mount namespaces with a
// fresh /proc in them, as unshare(1) finds independently. So a skip can
// only come from a refusal the kernel really makes: on a machine that
// allows them (CI's) the namespaced tests run and fail on real bugs; under
// a refusal (a chroot, user.max_user_namespaces=0) they skip naming it.
func TestNamespaceProbeAgrees(t *testing.T) {
	users := []user{asRoot, asNobody}
	if os.Getuid() != 0 {
		users = []user{{name: "this user"}}
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) { probeAgrees(t, u) })
	}
}

// probeAgrees is TestNamespaceProbeAgrees for u. Not through need(): its
// skip for nobody asks the very probe under test.
func probeAgrees(t *testing.T, u user) {
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	tools := []string{"unshare"}
	if len(u.wrap) > 0 {
		tools = append(tools, u.wrap[0])
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s (util-linux) is missing: nothing to compare the probe with", tool)
		}
	}
	got, err := runtimetest.ProbeNamespaces(rungvBin, u.wrap...)
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{}, u.wrap...), "unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--fork", "--mount-proc", "true")
	out, uerr := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	can := uerr == nil && !inGVisor()
	if got.OK != can {
		t.Fatalf("rungv's probe says namespaces=%v (%s: %s), but %s: %v %s", got.OK, got.Mode, got.Why, strings.Join(argv, " "), uerr, out)
	}
	if !got.UserNS && !strings.Contains(got.UserNSErr, "--isolation seccomp-only") {
		t.Errorf("a refused user namespace's reason names no way on: %q", got.UserNSErr)
	}
	t.Logf("as %s: namespaces=%v (%s: %s)", u.name, got.OK, got.Mode, got.Why)
}

// inGVisor: gVisor's network namespaces cannot bring lo up, so rungv runs
// seccomp-only there though unshare(1) works.
func inGVisor() bool {
	b, _ := os.ReadFile("/proc/version")
	return strings.Contains(string(b), "gvisor")
}
