package runtime

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procSys is where the sysctls are read, and sysAdmin tells whether this
// process has CAP_SYS_ADMIN (a test points them elsewhere).
var (
	procSys  = "/proc/sys"
	sysAdmin = func() bool { return hasCap(capSysAdmin) }
)

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

// usernsRefusal is err (a user namespace clone's error) and usernsHint's
// reason.
func usernsRefusal(err error) string { return err.Error() + ": " + usernsHint(err) }

// usernsHint says why the kernel refused this process a user namespace
// (err is the clone's error) and what to change: the sysctl that refuses
// it, with the command that allows it, or the chroot, seccomp filter or
// LSM that can. The first cause found wins; with none found it lists the
// candidates.
func usernsHint(err error) string {
	if errors.Is(err, unix.EUSERS) {
		return "user namespaces are nested 32 deep here, the kernel's limit: run rungv from a shallower one, or use --isolation seccomp-only"
	}
	if n, ok := readSysctl("user/max_user_namespaces"); ok && n == 0 {
		return "user.max_user_namespaces is 0 here: allow them with `sysctl -w user.max_user_namespaces=15000` (as root on the host; a namespace's limit applies to every namespace inside it), or use --isolation seccomp-only"
	}
	if errors.Is(err, unix.ENOSPC) {
		n, _ := readSysctl("user/max_user_namespaces")
		return "the user namespaces of this user, this namespace or one it is in reached their limit (user.max_user_namespaces is " + strconv.Itoa(n) + " here; a parent namespace's may be lower): raise it with `sysctl -w user.max_user_namespaces=15000`, end other sandboxes, or use --isolation seccomp-only"
	}
	if !sysAdmin() {
		if n, ok := readSysctl("kernel/unprivileged_userns_clone"); ok && n == 0 {
			return "kernel.unprivileged_userns_clone is 0 here, so only root may make one: allow them with `sysctl -w kernel.unprivileged_userns_clone=1`, run rungv as root, or use --isolation seccomp-only"
		}
		if n, ok := readSysctl("kernel/apparmor_restrict_unprivileged_userns"); ok && n != 0 {
			return "AppArmor restricts unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns=" + strconv.Itoa(n) + "): set it to 0 with `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, give rungv an AppArmor profile that allows `userns,`, run rungv as root, or use --isolation seccomp-only"
		}
	}
	if chrooted() {
		return "this process is chrooted (its / is not its mount namespace's root), and the kernel refuses a chrooted process a user namespace, root's too: run rungv outside the chroot (a root entered with pivot_root in its own mount namespace works), or use --isolation seccomp-only"
	}
	return "no sysctl here refuses it (user.max_user_namespaces, kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns): a seccomp filter or LSM of the container this runs in (Docker's default profile refuses unshare), or a chroot, can; run rungv outside it, or use --isolation seccomp-only"
}

// readSysctl reads an integer sysctl by its path under /proc/sys; ok is
// false where the kernel has no such sysctl.
func readSysctl(name string) (int, bool) {
	b, err := os.ReadFile(procSys + "/" + name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// hasCap tells whether this process has capability bit c in its effective
// set (in its own user namespace).
func hasCap(c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<c) != 0
		}
	}
	return false
}

// chrooted tells, where it can, whether this process's root differs from
// that of PID 1 in the same mount namespace (the namespace's own root, as
// an init's is): another inode, or the same one by another mount. Where
// PID 1 is in another mount namespace, or unreadable, it says false.
func chrooted() bool {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	init, err2 := os.Readlink("/proc/1/ns/mnt")
	if err1 != nil || err2 != nil || self != init {
		return false
	}
	// The mount ID too: a chroot into a bind mount of / has /'s inode.
	var a, b unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, "/", 0, unix.STATX_INO|unix.STATX_MNT_ID, &a) != nil ||
		unix.Statx(unix.AT_FDCWD, "/proc/1/root/", 0, unix.STATX_INO|unix.STATX_MNT_ID, &b) != nil {
		return false
	}
	if a.Dev_major != b.Dev_major || a.Dev_minor != b.Dev_minor || a.Ino != b.Ino {
		return true
	}
	return a.Mask&b.Mask&unix.STATX_MNT_ID != 0 && a.Mnt_id != b.Mnt_id
}
