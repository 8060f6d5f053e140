package runtime

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUsernsHint: each refusal names the setting that refuses the user
// namespace and the command that allows it; a privileged process is never
// told about the unprivileged-only switches.
func TestUsernsHint(t *testing.T) {
	for _, c := range []struct {
		name   string
		sysctl map[string]string
		admin  bool
		err    error
		want   string
	}{
		{"max 0", map[string]string{"user/max_user_namespaces": "0"}, true, unix.ENOSPC, "sysctl -w user.max_user_namespaces=15000"},
		{"max 0 as a user", map[string]string{"user/max_user_namespaces": "0", "kernel/unprivileged_userns_clone": "0"}, false, unix.ENOSPC, "user.max_user_namespaces is 0"},
		{"count reached", map[string]string{"user/max_user_namespaces": "3"}, true, unix.ENOSPC, "user.max_user_namespaces is 3 here"},
		{"nesting", map[string]string{"user/max_user_namespaces": "100"}, true, unix.EUSERS, "nested 32 deep"},
		{"debian switch", map[string]string{"user/max_user_namespaces": "100", "kernel/unprivileged_userns_clone": "0"}, false, unix.EPERM, "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"apparmor", map[string]string{"user/max_user_namespaces": "100", "kernel/unprivileged_userns_clone": "1", "kernel/apparmor_restrict_unprivileged_userns": "1"}, false, unix.EACCES, "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		{"root ignores the unprivileged switches", map[string]string{"user/max_user_namespaces": "100", "kernel/unprivileged_userns_clone": "0", "kernel/apparmor_restrict_unprivileged_userns": "1"}, true, unix.EPERM, "no sysctl here refuses it"},
		{"nothing found", map[string]string{"user/max_user_namespaces": "100"}, false, unix.EPERM, "a seccomp filter or LSM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, v := range c.sysctl {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			oldSys, oldAdmin := procSys, sysAdmin
			procSys, sysAdmin = dir, func() bool { return c.admin }
			defer func() { procSys, sysAdmin = oldSys, oldAdmin }()
			got := usernsHint(c.err)
			if !strings.Contains(got, c.want) {
				t.Errorf("usernsHint(%v) = %q, want it to contain %q", c.err, got, c.want)
			}
			if c.admin && (strings.Contains(got, "unprivileged_userns_clone=1") || strings.Contains(got, "apparmor_restrict_unprivileged_userns=0")) {
				t.Errorf("a privileged process is told about an unprivileged-only switch: %q", got)
			}
		})
	}
}

// probeChildEnv makes the test binary a child that lowers this user
// namespace's user.max_user_namespaces to 0 and prints ProbeIsolation.
const probeChildEnv = "GVX_TEST_PROBE_MAX0"

// chrootChildEnv makes the test binary, as "ns", the init of new user,
// mount and PID namespaces that binds / to the directory in
// chrootDirEnv and starts itself chrooted there, as "probe", which prints
// ProbeIsolation.
const (
	chrootChildEnv = "GVX_TEST_PROBE_CHROOT"
	chrootDirEnv   = "GVX_TEST_PROBE_CHROOT_DIR"
)

func init() {
	switch os.Getenv(chrootChildEnv) {
	case "ns":
		dir := os.Getenv(chrootDirEnv)
		fail := func(what string, err error) {
			os.Stderr.WriteString(what + ": " + err.Error() + "\n")
			os.Exit(3)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fail("make / private", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", 0, ""); err != nil {
			fail("mount this PID namespace's /proc", err)
		}
		if err := unix.Mount("/", dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			fail("bind / to "+dir, err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), chrootChildEnv+"=probe")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: dir}
		if err := cmd.Run(); err != nil {
			fail("the chrooted probe", err)
		}
		os.Exit(0)
	case "probe":
		b, _ := json.Marshal(ProbeIsolation())
		os.Stdout.Write(b)
		os.Exit(0)
	}
	if os.Getenv(probeChildEnv) == "" {
		return
	}
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0o644); err != nil {
		os.Stderr.WriteString("write user.max_user_namespaces: " + err.Error() + "\n")
		os.Exit(3)
	}
	b, _ := json.Marshal(ProbeIsolation())
	os.Stdout.Write(b)
	os.Exit(0)
}

// TestProbeIsolationMaxUserNamespaces: where user.max_user_namespaces is 0
// (set in a user namespace of the test's own, so only namespaces inside it
// are refused and nothing else on the machine is touched) the real probe
// picks seccomp-only and says which sysctl to change and how.
func TestProbeIsolationMaxUserNamespaces(t *testing.T) {
	if h := ProbeIsolation(); !h.UserNamespaces {
		t.Skipf("this user cannot make a user namespace here to lower the limit in: %s", h.UserNamespacesErr)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), probeChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	var h HostIsolation
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if h.UserNamespaces || h.Mode != IsolationSeccompOnly {
		t.Fatalf("with user.max_user_namespaces=0 the probe says %+v", h)
	}
	for _, want := range []string{"user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces="} {
		if !strings.Contains(h.Why, want) {
			t.Errorf("why %q does not say %q", h.Why, want)
		}
	}
	t.Logf("rungv info under user.max_user_namespaces=0: isolation: %s (%s)", h.Mode, h.Why)
}

// TestProbeIsolationChroot: a chrooted process (here: into a bind mount of
// /, in namespaces of the test's own, so nothing else is touched) is
// refused a user namespace, root too; the probe picks seccomp-only and
// says it is the chroot and what works instead (pivot_root), as in
// bench/freshroot.sh's first runs.
func TestProbeIsolationChroot(t *testing.T) {
	if h := ProbeIsolation(); !h.UserNamespaces || !h.ProcMountable {
		t.Skipf("no user namespace with a fresh /proc here to chroot in: %s%s", h.UserNamespacesErr, h.ProcErr)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), chrootChildEnv+"=ns", chrootDirEnv+"="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v %s%s", err, out, stderr.String())
	}
	var h HostIsolation
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if h.UserNamespaces || h.Mode != IsolationSeccompOnly {
		t.Fatalf("chrooted, the probe says %+v", h)
	}
	for _, want := range []string{"this process is chrooted", "pivot_root"} {
		if !strings.Contains(h.Why, want) {
			t.Errorf("why %q does not say %q", h.Why, want)
		}
	}
	t.Logf("rungv info chrooted: isolation: %s (%s)", h.Mode, h.Why)
}
