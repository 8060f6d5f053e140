package lockdown

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// child runs the calling test again in a process of its own (what it
// tests cannot be undone in this one), with env(), made in the parent
// only, set; it reports whether this is that child.
func child(t *testing.T, env func() string) bool {
	if os.Getenv("LOCKDOWN_TEST_CHILD") != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCKDOWN_TEST_CHILD=1", env())
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return false
}

// TestLandlockConfines: once restricted, the process opens what a Rule
// grants and nothing else, as an attacker who took it over would try.
func TestLandlockConfines(t *testing.T) {
	if LandlockABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	if !child(t, func() string { return "LOCKDOWN_TEST_DIRS=" + t.TempDir() + ":" + t.TempDir() }) {
		return
	}
	dirs := strings.Split(os.Getenv("LOCKDOWN_TEST_DIRS"), ":")
	in, out := filepath.Join(dirs[0], "in"), filepath.Join(dirs[1], "out")
	for _, p := range []string{in, out} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runtime.LockOSThread()
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		t.Fatal(e)
	}
	if err := LandlockRestrict(LandlockABI(), []Rule{{Path: dirs[0], Access: unix.LANDLOCK_ACCESS_FS_READ_FILE}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(in); err != nil {
		t.Errorf("the granted file: %v", err)
	}
	if _, err := os.ReadFile(out); !errors.Is(err, unix.EACCES) {
		t.Errorf("a file outside every rule: %v, want EACCES", err)
	}
	if err := os.WriteFile(in, nil, 0o644); !errors.Is(err, unix.EACCES) {
		t.Errorf("writing the read-only granted file: %v, want EACCES", err)
	}
}

// TestDropCapsAsRoot: root without its capabilities cannot chown a file
// to another user, nor get a capability back into its bounding set.
func TestDropCapsAsRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: an unprivileged process has no capability to drop")
	}
	if !child(t, func() string { return "LOCKDOWN_TEST_DIR=" + t.TempDir() }) {
		return
	}
	f := filepath.Join(os.Getenv("LOCKDOWN_TEST_DIR"), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := DropCaps(nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f, 65534, 65534); !errors.Is(err, unix.EPERM) {
		t.Errorf("chown after DropCaps: %v, want EPERM", err)
	}
	if ok, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_CHOWN, 0, 0, 0); err != nil || ok != 0 {
		t.Errorf("CAP_CHOWN still in the bounding set: %d, %v", ok, err)
	}
}
