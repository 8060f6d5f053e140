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
	offArg1 = 24 // seccomp_data.args[1], low word on little-endian
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
	unix.SYS_SOCKET, unix.SYS_CONNECT, unix.SYS_BIND, // socketpair stays: -p TCP splices through one (it reaches nothing)
}, archDenied...)

// Lockdown sets no_new_privs and installs a seccomp filter on every thread
// of the calling process: the syscalls in deniedSyscalls fail with EPERM,
// clone3 with ENOSYS (so callers fall back to clone), clone with any
// namespace flag with EPERM, and a syscall of another ABI (x32, 32-bit)
// kills the process. It is irreversible; use it only in a process whose
// one job is to supervise an already-started episode.
func Lockdown() error { return lockdown(false) }

// LockdownNAT is Lockdown for the host side of a --network nat episode,
// which dials the guest's destinations with its own sockets: socket() is
// allowed for AF_INET and AF_INET6 stream and datagram sockets (every
// other family, and raw sockets, still fail with EPERM), and connect() is
// allowed. Everything else is as Lockdown.
func LockdownNAT() error { return lockdown(true) }

func lockdown(inet bool) error {
	prog, err := lockdownProgram(inet)
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

// bpfInsn is an instruction whose jump targets are labels, resolved by
// assemble.
type bpfInsn struct {
	code   uint16
	k      uint32
	jt, jf string // labels; "" is the next instruction
	label  string // this instruction's label
}

// assemble resolves labels into relative jumps (forward only, < 256).
func assemble(insns []bpfInsn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range insns {
		if in.label != "" {
			at[in.label] = i
		}
	}
	rel := func(i int, l string) (uint8, error) {
		if l == "" {
			return 0, nil
		}
		to, ok := at[l]
		if !ok || to <= i || to-i-1 > 255 {
			return 0, fmt.Errorf("seccomp: bad jump from %d to %q", i, l)
		}
		return uint8(to - i - 1), nil
	}
	p := make([]unix.SockFilter, len(insns))
	for i, in := range insns {
		jt, err := rel(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := rel(i, in.jf)
		if err != nil {
			return nil, err
		}
		p[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: jt, Jf: jf}
	}
	return p, nil
}

// lockdownProgram assembles the filter; inet allows AF_INET/AF_INET6
// sockets and connect (LockdownNAT).
func lockdownProgram(inet bool) ([]unix.SockFilter, error) {
	var arch uint32
	switch goruntime.GOARCH {
	case "amd64":
		arch = auditArchX8664
	case "arm64":
		arch = auditArchAarch64
	default:
		return nil, fmt.Errorf("%w: seccomp lockdown on %s", ErrUnsupported, goruntime.GOARCH)
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	p := []bpfInsn{
		{code: ldW, k: offArch},
		{code: jeq, k: arch, jf: "kill"},
		{code: ldW, k: offNr},
		{code: jge, k: x32SyscallBit, jt: "eperm"},
		{code: jeq, k: uint32(unix.SYS_CLONE3), jt: "enosys"},
		{code: jeq, k: uint32(unix.SYS_CLONE), jt: "clone"},
	}
	if inet {
		p = append(p, bpfInsn{code: jeq, k: uint32(unix.SYS_SOCKET), jt: "socket"})
	}
	for _, nr := range deniedSyscalls {
		if inet && (nr == unix.SYS_SOCKET || nr == unix.SYS_CONNECT) {
			continue
		}
		p = append(p, bpfInsn{code: jeq, k: uint32(nr), jt: "eperm"})
	}
	p = append(p,
		bpfInsn{code: ret, k: seccompRetAllow}, // the common path
		bpfInsn{label: "clone", code: ldW, k: offArg0},
		bpfInsn{code: jset, k: nsCloneFlags, jt: "eperm", jf: "allow"},
	)
	if inet {
		// socket(AF_INET or AF_INET6, SOCK_STREAM or SOCK_DGRAM, with
		// any SOCK_NONBLOCK/SOCK_CLOEXEC).
		p = append(p,
			bpfInsn{label: "socket", code: ldW, k: offArg0},
			bpfInsn{code: jeq, k: unix.AF_INET, jt: "sockType"},
			bpfInsn{code: jeq, k: unix.AF_INET6, jf: "eperm"},
			bpfInsn{label: "sockType", code: ldW, k: offArg1},
			bpfInsn{code: and, k: 0xf}, // SOCK_TYPE_MASK
			bpfInsn{code: jeq, k: unix.SOCK_STREAM, jt: "allow"},
			bpfInsn{code: jeq, k: unix.SOCK_DGRAM, jt: "allow", jf: "eperm"},
		)
	}
	p = append(p,
		bpfInsn{label: "allow", code: ret, k: seccompRetAllow},
		bpfInsn{label: "eperm", code: ret, k: seccompRetErrno | uint32(unix.EPERM)},
		bpfInsn{label: "enosys", code: ret, k: seccompRetErrno | uint32(unix.ENOSYS)},
		bpfInsn{label: "kill", code: ret, k: seccompRetKillProcess},
	)
	return assemble(p)
}
