package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// HostIsolation is what this host lets rungv build around the Sentry
// (rungv info reports it).
type HostIsolation struct {
	// UserNamespaces tells whether a user namespace (with network, PID
	// and mount namespaces in it) can be made; UserNamespacesErr why not
	// and what to change (the sysctl, chroot or filter that refuses it).
	UserNamespaces    bool   `json:"user_namespaces"`
	UserNamespacesErr string `json:"user_namespaces_error,omitempty"`
	// ProcMountable tells whether a fresh /proc may be mounted in such a
	// namespace: not where /proc has masked paths (a container's), which
	// the kernel then refuses (mount_too_revealing).
	ProcMountable bool   `json:"proc_mountable"`
	ProcErr       string `json:"proc_error,omitempty"`
	// InGVisor tells whether this is itself a gVisor sandbox (whose
	// network namespaces cannot bring an interface up by ioctl).
	InGVisor bool `json:"in_gvisor"`
	// Mode is what IsolationAuto picks here, Why the reason.
	Mode Isolation `json:"mode"`
	Why  string    `json:"why"`
}

// ProbeIsolation finds out what the host allows. It costs one fork (the
// user namespace is tried for real, then the child fails to exec) and
// reading /proc/self/mountinfo.
func ProbeIsolation() HostIsolation {
	var h HostIsolation
	if err := tryUserNamespace(); err != nil {
		h.UserNamespacesErr = usernsRefusal(err)
	} else {
		h.UserNamespaces = true
	}
	if masked := maskedProc(); masked != "" {
		h.ProcErr = "/proc has paths mounted over (" + masked + "): the kernel refuses a new /proc in a user namespace"
	} else {
		h.ProcMountable = true
	}
	h.InGVisor = inGVisor()
	switch {
	case !h.UserNamespaces:
		h.Mode, h.Why = IsolationSeccompOnly, "no user namespace: "+h.UserNamespacesErr
	case !h.ProcMountable:
		h.Mode, h.Why = IsolationSeccompOnly, h.ProcErr
	case h.InGVisor:
		h.Mode, h.Why = IsolationSeccompOnly, "inside gVisor: its network namespaces cannot bring lo up"
	default:
		h.Mode, h.Why = IsolationNamespaces, "user, network, PID and mount namespaces are available"
	}
	return h
}

// resolveIsolation turns IsolationAuto ("" too) into the mode this host
// allows.
func resolveIsolation(i Isolation) (Isolation, error) {
	switch i {
	case "", IsolationAuto:
		return ProbeIsolation().Mode, nil
	case IsolationNamespaces, IsolationSeccompOnly:
		return i, nil
	}
	return "", fmt.Errorf("%w: isolation %q: want auto, namespaces or seccomp-only", ErrBadOption, i)
}

// tryUserNamespace clones a child into new user, network, PID and mount
// namespaces (as the supervisor and init need them) and lets its exec
// fail: ENOENT from the exec means the clone worked.
func tryUserNamespace() error {
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}}
	pid, err := syscall.ForkExec("/nonexistent/rungv-userns-probe", []string{"probe"}, attr)
	if err == nil {
		_, _ = syscall.Wait4(pid, nil, 0, nil)
		return nil
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// maskedProc names the first path mounted over inside /proc that makes
// the kernel refuse a fresh proc mount in a user namespace, or "". Mounts
// on /proc's own empty mount points (binfmt_misc) do not count.
func maskedProc() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if strings.HasPrefix(mp, "/proc/") && mp != "/proc/sys/fs/binfmt_misc" {
			return mp
		}
	}
	return ""
}

// inGVisor tells whether this process runs in a gVisor sandbox: gVisor's
// /proc/version is its own fixed string ("Linux version 4.19.0-gvisor #1
// SMP Sun Jan 10 15:06:54 PST 2016" in the pinned version).
func inGVisor() bool {
	b, err := os.ReadFile("/proc/version")
	if err != nil {
		return false
	}
	v := string(b)
	return strings.Contains(v, "-gvisor ") || strings.Contains(v, "#1 SMP Sun Jan 10 15:06:54 PST 2016")
}
