package runtime

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLockdown runs Lockdown in a child (it is irreversible) and checks,
// from inside, that the denied calls fail and ordinary ones work, and that
// /proc shows no_new_privs and a seccomp filter.
func TestLockdown(t *testing.T) {
	if os.Getenv("GVX_LOCKDOWN_CHILD") == "1" {
		lockdownChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockdown$")
	cmd.Env = append(os.Environ(), "GVX_LOCKDOWN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("lockdown-ok")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func lockdownChild() {
	fail := func(msg string, args ...any) {
		os.Stdout.WriteString("FAIL: " + msg + "\n")
		os.Exit(1)
	}
	if err := Lockdown(); err != nil {
		fail(err.Error())
	}
	st, _ := os.ReadFile("/proc/self/status")
	if !bytes.Contains(st, []byte("NoNewPrivs:\t1")) || !bytes.Contains(st, []byte("Seccomp:\t2")) {
		fail("status: " + string(st))
	}
	if err := exec.Command("/bin/true").Run(); err == nil || !errors.Is(err, unix.EPERM) {
		fail("exec was not refused")
	}
	if err := unix.Unshare(unix.CLONE_NEWUSER); !errors.Is(err, unix.EPERM) {
		fail("unshare was not refused")
	}
	if _, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); !errors.Is(err, unix.EPERM) {
		fail("socket was not refused")
	}
	// What the host side still needs works.
	d, err := os.MkdirTemp("", "lockdown-")
	if err == nil {
		err = os.RemoveAll(d)
	}
	if err != nil {
		fail("files: " + strings.TrimSpace(err.Error()))
	}
	os.Stdout.WriteString("lockdown-ok\n")
	os.Exit(0)
}
