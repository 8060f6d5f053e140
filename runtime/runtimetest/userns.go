package runtimetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Namespaces is rungv's isolation probe (rungv info) for one user.
type Namespaces struct {
	// OK tells whether --isolation auto picks namespaces for this user
	// here: the user, network, PID and mount namespaces the supervisor
	// and init make, and a fresh /proc in them.
	OK bool
	// Mode is what auto picks, Why rungv's reason (naming the sysctl,
	// chroot or filter that refuses a user namespace, and the fix).
	Mode, Why string
	// UserNS tells whether the user namespace alone can be made (a
	// seccomp-only episode run by a user other than root needs none, but
	// the rootless variants of the tests start their own); UserNSErr why
	// not, and the fix.
	UserNS    bool
	UserNSErr string
}

var (
	probeMu    sync.Mutex
	probeCache = map[string]Namespaces{}
)

// whoName is who, or "" this process's user.
func whoName(who string) string {
	switch {
	case who != "":
		return who
	case os.Getuid() == 0:
		return "root"
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// ProbeNamespaces runs rungv info --json with the command prefix wrap
// (nil: as this process's user; e.g. setpriv --reuid=65534 … for nobody)
// and returns its isolation probe, the same code rungv run's
// --isolation auto uses. Answers are kept per binary and prefix.
func ProbeNamespaces(rungv string, wrap ...string) (Namespaces, error) {
	key := strings.Join(append([]string{rungv}, wrap...), "\x00")
	probeMu.Lock()
	defer probeMu.Unlock()
	if n, ok := probeCache[key]; ok {
		return n, nil
	}
	argv := append(append(append([]string{}, wrap...), rungv), "info", "--json")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return Namespaces{}, fmt.Errorf("%s: %v %s", strings.Join(argv, " "), err, msg)
	}
	var info struct {
		Isolation struct {
			Mode      string `json:"mode"`
			Why       string `json:"why"`
			UserNS    bool   `json:"user_namespaces"`
			UserNSErr string `json:"user_namespaces_error"`
		} `json:"isolation"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Isolation.Mode == "" {
		return Namespaces{}, fmt.Errorf("%s: no isolation probe in its answer (%v):\n%s", strings.Join(argv, " "), err, out)
	}
	i := info.Isolation
	n := Namespaces{OK: i.Mode == "namespaces", Mode: i.Mode, Why: i.Why, UserNS: i.UserNS, UserNSErr: i.UserNSErr}
	probeCache[key] = n
	return n, nil
}

// NeedNamespaces skips t, with rungv's reason and fix, where rungv run as
// who ("": this process's user; with the command prefix wrap) cannot make the namespaces its
// namespaced mode needs, so --isolation auto would run seccomp-only (a
// chroot, user.max_user_namespaces=0, kernel.unprivileged_userns_clone=0,
// AppArmor's restriction, a container's seccomp filter). It fails t when
// the probe itself fails. Where the namespaces can be made it returns and
// the test runs.
func NeedNamespaces(t testing.TB, rungv, who string, wrap ...string) {
	t.Helper()
	n, err := ProbeNamespaces(rungv, wrap...)
	if err != nil {
		t.Fatalf("isolation probe: %v", err)
	}
	who = whoName(who)
	if !n.OK {
		t.Skipf("rungv as %s cannot use namespaces here (--isolation auto runs %s): %s", who, n.Mode, n.Why)
	}
}

// NeedUserNamespace skips t, with rungv's reason and fix, where rungv run
// as who (with the command prefix wrap) cannot make a user namespace (a
// rootless sandbox's first step); it fails t when the probe itself fails.
func NeedUserNamespace(t testing.TB, rungv, who string, wrap ...string) {
	t.Helper()
	n, err := ProbeNamespaces(rungv, wrap...)
	if err != nil {
		t.Fatalf("isolation probe: %v", err)
	}
	who = whoName(who)
	if !n.UserNS {
		t.Skipf("rungv as %s cannot make a user namespace here: %s", who, n.UserNSErr)
	}
}
