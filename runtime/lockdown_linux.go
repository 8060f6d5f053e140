package runtime

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BPF seccomp constants (linux/seccomp.h, linux/audit.h).
const (
	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000
	auditArchX8664        = 0xc000003e
	auditArchAarch64      = 0xc00000b7
	x32SyscallBit         = 0x40000000

	offNr   = 0  // seccomp_data.nr
	offArch = 4  // seccomp_data.arch
	offArg0 = 16 // seccomp_data.args[0], low word on little-endian
)

// nsCloneFlags are the clone flags that make new namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// deniedSyscalls are refused with EPERM once the host process is locked
// down. The host side of an episode only waits, forwards signals, copies
// stdio and removes its state directory; none of these is needed for that,
// and each is a classic step of a host escape or privilege gain.
var deniedSyscalls = append([]uintptr{
	unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_PTRACE,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL,
	unix.SYS_SYSLOG, unix.SYS_PERSONALITY,
	unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
	unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETGROUPS,
	unix.SYS_SETFSUID, unix.SYS_SETFSGID, unix.SYS_CAPSET,
	unix.SYS_SOCKET, unix.SYS_SOCKETPAIR, unix.SYS_CONNECT, unix.SYS_BIND,
}, archDenied...)

// Lockdown sets no_new_privs and installs a seccomp filter on every thread
// of the calling process: the syscalls in deniedSyscalls fail with EPERM,
// clone3 with ENOSYS (so callers fall back to clone), clone with any
// namespace flag with EPERM, and a syscall of another ABI (x32, 32-bit)
// kills the process. It is irreversible; use it only in a process whose
// one job is to supervise an already-started episode.
func Lockdown() error {
	prog, err := lockdownProgram()
	if err != nil {
		return err
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC applies the filter (and no_new_privs) to every thread.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER, TSYNC): %w", errno)
	}
	return nil
}

// lockdownProgram assembles the filter.
func lockdownProgram() ([]unix.SockFilter, error) {
	var arch uint32
	switch goruntime.GOARCH {
	case "amd64":
		arch = auditArchX8664
	case "arm64":
		arch = auditArchAarch64
	default:
		return nil, fmt.Errorf("%w: seccomp lockdown on %s", ErrUnsupported, goruntime.GOARCH)
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	// Tail, in order: [allow] [eperm] [enosys] [kill]. Jumps are relative
	// to the next instruction, so each check is emitted knowing how many
	// instructions follow it.
	var p []unix.SockFilter
	p = append(p, stmt(ldW, offArch))
	// Denied-number checks come after: n := len(deniedSyscalls).
	n := len(deniedSyscalls)
	// Layout after the arch check:
	//   0: ld nr
	//   1: jge x32 → eperm
	//   2: jeq clone3 → enosys
	//   3: jeq clone → (clone check at 4+n)
	//   4..4+n-1: jeq denied_i → eperm
	//   4+n: ret allow        (the common path)
	//   5+n: ld arg0          (clone)
	//   6+n: jset nsflags → eperm, else allow
	//   7+n: ret allow
	//   8+n: ret eperm
	//   9+n: ret enosys
	//  10+n: ret kill
	idx := func(i int) int { return 2 + i } // program index of layout slot i
	rel := func(from, to int) uint8 { return uint8(idx(to) - idx(from) - 1) }
	if 10+n > 250 {
		return nil, fmt.Errorf("seccomp: too many rules")
	}
	// arch check: equal → slot 0, else kill.
	p = append(p, jump(jeq, arch, 0, uint8(idx(10+n)-1-1)))
	p = append(p, stmt(ldW, offNr))
	p = append(p, jump(jge, x32SyscallBit, rel(1, 8+n), 0))
	p = append(p, jump(jeq, uint32(unix.SYS_CLONE3), rel(2, 9+n), 0))
	p = append(p, jump(jeq, uint32(unix.SYS_CLONE), rel(3, 5+n), 0))
	for i, nr := range deniedSyscalls {
		p = append(p, jump(jeq, uint32(nr), rel(4+i, 8+n), 0))
	}
	p = append(p, stmt(ret, seccompRetAllow))
	p = append(p, stmt(ldW, offArg0))
	p = append(p, jump(jset, nsCloneFlags, rel(6+n, 8+n), 0))
	p = append(p, stmt(ret, seccompRetAllow))
	p = append(p, stmt(ret, seccompRetErrno|uint32(unix.EPERM)))
	p = append(p, stmt(ret, seccompRetErrno|uint32(unix.ENOSYS)))
	p = append(p, stmt(ret, seccompRetKillProcess))
	return p, nil
}
