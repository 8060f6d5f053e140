package lockdown

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock confines the file system a locked-down process may still reach
// by path: seccomp cannot look at paths, so where a profile keeps a
// capability that overrides file permissions (the supervisor's
// CAP_DAC_OVERRIDE, to remove cgroup directories from a hierarchy root
// that is mode 0555), Landlock limits it to the directories that need it.

// Rule grants Access (LANDLOCK_ACCESS_FS_* bits) beneath Path.
type Rule struct {
	Path   string
	Access uint64
}

// LandlockABI is the kernel's Landlock ABI version, or 0 without
// Landlock (an old kernel, or the LSM not enabled).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// LandlockHandled is every file-system right the ABI abi knows: all are
// denied but what a rule grants.
func LandlockHandled(abi int) uint64 {
	h := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// LandlockRestrict confines every thread of the process to rules (no
// file-system access by path but what they grant). Every thread must
// already have no_new_privs. A rule whose path is gone is skipped.
func LandlockRestrict(abi int, rules []Rule) error {
	return LandlockRestrictHandled(LandlockHandled(abi), rules, false)
}

// LandlockRestrictHandled is LandlockRestrict with the rights handled
// (denied but where a rule grants them) given; with thisThread, only the
// calling thread is confined (it must have no_new_privs), to exec a
// program that then runs in that one domain.
func LandlockRestrictHandled(handled uint64, rules []Rule, thisThread bool) error {
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	// Only the fs field is passed: every ABI accepts that size.
	rfd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr.Handled_access_fs), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(rfd))
	for _, r := range rules {
		fd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.ENOENT {
				continue
			}
			return fmt.Errorf("landlock: %s: %w", r.Path, err)
		}
		pb := unix.LandlockPathBeneathAttr{Allowed_access: r.Access & handled, Parent_fd: int32(fd)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, rfd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		unix.Close(fd)
		if e != 0 {
			return fmt.Errorf("landlock_add_rule %s: %w", r.Path, e)
		}
	}
	if thisThread {
		if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, rfd, 0, 0); e != 0 {
			return fmt.Errorf("landlock_restrict_self: %w", e)
		}
		return nil
	}
	// A Landlock domain is per thread: every thread takes it.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, rfd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}
