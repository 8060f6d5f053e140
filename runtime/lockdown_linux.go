package runtime

import (
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/runtime/lockdown"
)

// The lockdown of rungv's own host processes. Every process of an episode
// that lives past its setup (the host side, the supervisor, the episode's
// init) ends that setup with lockdownAs and its profile: not dumpable, no
// capabilities it does not need, no_new_privs, and a seccomp ALLOWLIST.
// A syscall that is not in the profile fails with EPERM (clone3 with
// ENOSYS, so Go falls back to clone); a syscall of another ABI (x32, a
// 32-bit entry) kills the process. runsc's own processes (sandbox, gofer)
// install gVisor's filters and are not touched here.

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
	offArg2 = 32 // seccomp_data.args[2], low word on little-endian

	// prSetVMA is PR_SET_VMA: the Go runtime (1.25+) names its anonymous
	// mappings with it.
	prSetVMA = 0x53564d41
	// oTmpfileBit is __O_TMPFILE, the bit O_TMPFILE adds to O_DIRECTORY.
	oTmpfileBit = unix.O_TMPFILE &^ unix.O_DIRECTORY
)

// nsCloneFlags are the clone flags that make new namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// baseSyscalls are what every locked-down rungv process may call with any
// arguments: the Go runtime (memory, threads' futexes and signals, timers,
// the netpoller), I/O on descriptors it already holds (pipes, sockets,
// files), waiting for its children, and removing a directory tree
// (os.RemoveAll; what it reaches by path is up to openat's restriction
// and Landlock). Argument-restricted calls (clone, openat, fcntl, kill,
// tgkill, prctl, socket) are handled by lockdownProgram.
var baseSyscalls = append([]uintptr{
	// memory and threads
	unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MADVISE,
	unix.SYS_FUTEX, unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY,
	unix.SYS_GETTID, unix.SYS_GETPID, unix.SYS_GETPPID,
	unix.SYS_GETUID, unix.SYS_GETEUID, unix.SYS_GETGID, unix.SYS_GETEGID,
	unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_RESTART_SYSCALL,
	unix.SYS_GETRANDOM,
	// signals (to itself: tgkill and kill are restricted below)
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN,
	unix.SYS_SIGALTSTACK,
	// time
	unix.SYS_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES,
	unix.SYS_CLOCK_NANOSLEEP, unix.SYS_GETTIMEOFDAY,
	// the netpoller, and gVisor's blocking waits
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_EVENTFD2, unix.SYS_PPOLL, unix.SYS_PIPE2,
	// descriptors it holds
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV,
	unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_LSEEK, unix.SYS_CLOSE,
	unix.SYS_DUP, unix.SYS_DUP3, unix.SYS_FSTAT,
	unix.SYS_SPLICE, unix.SYS_SENDFILE, unix.SYS_COPY_FILE_RANGE,
	unix.SYS_RECVMSG, unix.SYS_SENDMSG, unix.SYS_RECVFROM, unix.SYS_SENDTO,
	unix.SYS_RECVMMSG, unix.SYS_SENDMMSG, unix.SYS_SHUTDOWN,
	unix.SYS_GETSOCKOPT, unix.SYS_SETSOCKOPT, unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME,
	// os.RemoveAll of the state directory (openat is restricted below)
	unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_GETDENTS64, unix.SYS_UNLINKAT,
	unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2, unix.SYS_READLINKAT,
	// its children (os/exec: waitid on the pidfd, or wait4)
	unix.SYS_WAIT4, unix.SYS_WAITID, unix.SYS_PIDFD_SEND_SIGNAL,
}, archSyscalls...)

// sockType is one socket(family, type, 0) a profile allows.
type sockType struct{ family, typ uint32 }

// profile is what one kind of rungv host process may still do once it is
// locked down.
type profile struct {
	name string
	// extra are syscalls allowed, with any arguments, on top of
	// baseSyscalls.
	extra []uintptr
	// sockets are the socket() calls allowed (protocol 0, any
	// SOCK_NONBLOCK/SOCK_CLOEXEC). connect is allowed if any is.
	sockets []sockType
	// signals are the PIDs kill() may target besides the process itself.
	signals []int
	// keepCaps are the capabilities kept (in the process's user
	// namespace); every other one is dropped from the effective,
	// permitted, inheritable, ambient and (where allowed) bounding sets.
	keepCaps []uintptr
	// landlock confines access by path to files (Landlock; an empty
	// list: no access by path at all) where the kernel has Landlock.
	landlock bool
	files    []lockdown.Rule
	// landlockCaps are kept too, but only where Landlock confines them.
	landlockCaps []uintptr
}

// hostProfile is the host side's (rungv run): it waits for the
// supervisor and forwards signals to it, copies stdio, serves published
// ports on listeners it opened before (accept4; a TCP client is spliced
// through a new socketpair, which reaches nothing, and each client goes to
// the guest with sendmsg), removes the state directory and the published
// socket files in sockDirs. With NAT it also dials the guest's TCP and UDP
// destinations: AF_INET and AF_INET6 stream and datagram sockets and
// connect, nothing else (no unix, netlink, packet or raw sockets, no
// bind). By path it reaches only state (removeState; "": nothing at all)
// and may remove files in sockDirs: not /proc/PID of another process
// either, whose directory would do as a pidfd for pidfd_send_signal.
func hostProfile(nat bool, state string, supervisor []int, sockDirs []string) profile {
	p := profile{name: "host", extra: []uintptr{unix.SYS_ACCEPT4, unix.SYS_SOCKETPAIR}, signals: supervisor,
		landlock: true, files: append(stateRules(state), removeFileRules(sockDirs)...)}
	if nat {
		p.name = "host-nat"
		p.sockets = []sockType{
			{unix.AF_INET, unix.SOCK_STREAM}, {unix.AF_INET, unix.SOCK_DGRAM},
			{unix.AF_INET6, unix.SOCK_STREAM}, {unix.AF_INET6, unix.SOCK_DGRAM},
		}
	}
	return p
}

// removeFileRules let a process remove files in dirs (published sockets).
// directProfile is the host side's with IsolationSeccompOnly: the
// host side's (hostProfile; the sandbox is its child, signalled as
// sandbox) and what serving the volumes takes, since there is no gofer:
// ext4lite's I/O on the volume files it holds (pread64 and pwrite64 are
// base), lisafs's channels (memfd_create, ftruncate of the channel's
// memory), and removing the episode's host cgroups, if any, once the
// sandbox is gone.
func directProfile(nat bool, state string, sandbox []int, sockDirs, cgroups []string) profile {
	p := hostProfile(nat, state, sandbox, sockDirs)
	p.name = "direct"
	if nat {
		p.name = "direct-nat"
	}
	p.extra = append(p.extra, unix.SYS_MEMFD_CREATE, unix.SYS_FTRUNCATE, unix.SYS_FALLOCATE,
		unix.SYS_FSYNC, unix.SYS_FDATASYNC)
	for _, d := range cgroups {
		p.files = append(p.files, lockdown.Rule{Path: filepath.Dir(d), Access: unix.LANDLOCK_ACCESS_FS_REMOVE_DIR})
	}
	if len(cgroups) > 0 {
		p.landlockCaps = []uintptr{unix.CAP_DAC_OVERRIDE}
	}
	return p
}

func removeFileRules(dirs []string) []lockdown.Rule {
	var rules []lockdown.Rule
	for _, d := range dirs {
		rules = append(rules, lockdown.Rule{Path: d, Access: unix.LANDLOCK_ACCESS_FS_REMOVE_FILE})
	}
	return rules
}

// stateRules let a process read and remove everything beneath state, and
// remove state itself from its parent (removeState opens the parent
// before the lockdown).
func stateRules(state string) []lockdown.Rule {
	if state == "" {
		return nil
	}
	return []lockdown.Rule{
		{Path: state, Access: unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
			unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
		{Path: filepath.Dir(state), Access: unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
	}
}

// supervisorProfile is the supervisor's, once it started init: it waits
// for init, forwards signals to it, kills it when the host side goes,
// removes the state directory and the published socket files in sockDirs,
// and leaves its cgroups (writes the cgroup.procs files it opened before,
// removes the cgroup directories). By path it reaches only the state
// directory, may remove directories beneath its parent (the state
// directory itself, removeState) and beneath its cgroups' parents, and
// files in sockDirs. For the cgroups it keeps CAP_DAC_OVERRIDE in its user
// namespace where Landlock holds it to that: a v1 hierarchy's root is mode
// 0555, even for root.
func supervisorProfile(init int, state string, cgroups, sockDirs []string) profile {
	p := profile{name: "supervisor", signals: []int{init}, landlock: true}
	p.files = append(stateRules(state), removeFileRules(sockDirs)...)
	for _, d := range cgroups {
		p.files = append(p.files, lockdown.Rule{Path: filepath.Dir(d), Access: unix.LANDLOCK_ACCESS_FS_REMOVE_DIR})
	}
	if len(cgroups) > 0 {
		p.landlockCaps = []uintptr{unix.CAP_DAC_OVERRIDE}
	}
	return p
}

// initProfile is the episode init's, once runsc run --detach is done and
// the connection to the sandbox's control server is open: it waits for
// the sandbox, reaps the namespace's orphans, sends signals to the guest
// over that connection (no new socket, no exec) and SIGKILLs the sandbox
// when that connection fails (the sandbox runs under init's own uid: no
// capability is needed for that).
func initProfile(sandbox int) profile {
	return profile{name: "init", signals: []int{sandbox}, landlock: true}
}

// Lockdown locks the calling process down as the host side of an episode
// without NAT (hostProfile): every capability dropped, not dumpable,
// no_new_privs, by path only the state directory state (Landlock, where
// the kernel has it; "": no path at all), and the allowlist. kill() may
// target the process itself and the PIDs in signal (the supervisor). It is
// irreversible; use it only in a process whose one job is to supervise an
// already-started episode.
func Lockdown(state string, signal ...int) error {
	return lockdownAs(hostProfile(false, state, signal, nil))
}

// LockdownNAT is Lockdown for the host side of a --network nat episode,
// which dials the guest's destinations with its own sockets: socket() for
// AF_INET and AF_INET6 stream and datagram sockets, and connect().
func LockdownNAT(state string, signal ...int) error {
	return lockdownAs(hostProfile(true, state, signal, nil))
}

// lockdownAs locks the calling process down with profile p. Order matters:
// capabilities go first (capset and the bounding set need CAP_SETPCAP,
// which is about to go, and are not in any allowlist), then dumpable,
// then no_new_privs on every thread, Landlock, and the filter on every
// thread (TSYNC).
func lockdownAs(p profile) error {
	if builtWithCgo {
		// syscall.AllThreadsSyscall, for what is per thread, needs it.
		return fmt.Errorf("%w: lockdown in a binary built with cgo (build with CGO_ENABLED=0)", ErrUnsupported)
	}
	prog, err := lockdownProgram(p, unix.Getpid())
	if err != nil {
		return err
	}
	abi := 0
	if p.landlock {
		abi = lockdown.LandlockABI()
	}
	keep := p.keepCaps
	if abi > 0 {
		keep = append(append([]uintptr{}, keep...), p.landlockCaps...)
	}
	if err := lockdown.DropCaps(keep); err != nil {
		return fmt.Errorf("lockdown %s: %w", p.name, err)
	}
	// Not dumpable: /proc/PID/mem, ptrace and process_vm_* from other
	// processes need CAP_SYS_PTRACE over this one (see docs/runtime.md
	// for who still has it), and no core dump leaks memory.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("lockdown %s: prctl(PR_SET_DUMPABLE): %w", p.name, err)
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("lockdown %s: prctl(PR_SET_NO_NEW_PRIVS): %w", p.name, err)
	}
	if abi > 0 {
		// Landlock wants no_new_privs on every thread it restricts.
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
			return fmt.Errorf("lockdown %s: prctl(PR_SET_NO_NEW_PRIVS) on every thread: %w", p.name, e)
		}
		if err := lockdown.LandlockRestrict(abi, p.files); err != nil {
			return fmt.Errorf("lockdown %s: %w", p.name, err)
		}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// TSYNC applies the filter (and no_new_privs) to every thread.
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("lockdown %s: seccomp(SET_MODE_FILTER, TSYNC): %w", p.name, errno)
	}
	return nil
}

// lockdownProgram assembles p's allowlist for the process self (its PID,
// which tgkill and kill may target).
func lockdownProgram(p profile, self int) ([]unix.SockFilter, error) {
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
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	prog := []lockdown.Insn{
		{Code: ldW, K: offArch},
		{Code: jeq, K: arch, Jf: "kill"},
		{Code: ldW, K: offNr},
	}
	if arch == auditArchX8664 {
		prog = append(prog, lockdown.Insn{Code: jset, K: x32SyscallBit, Jt: "kill"})
	}
	// Calls allowed only with some arguments: each has its block below.
	special := []struct {
		nr    uintptr
		label string
	}{
		{unix.SYS_CLONE, "clone"},
		{unix.SYS_CLONE3, "enosys"},
		{unix.SYS_OPENAT, "openat"},
		{unix.SYS_FCNTL, "fcntl"},
		{unix.SYS_KILL, "killcall"},
		{unix.SYS_TGKILL, "tgkill"},
		{unix.SYS_PRCTL, "prctl"},
	}
	if len(p.sockets) > 0 {
		special = append(special, struct {
			nr    uintptr
			label string
		}{unix.SYS_SOCKET, "socket"})
	}
	for _, s := range special {
		prog = append(prog, lockdown.Insn{Code: jeq, K: uint32(s.nr), Jt: s.label})
	}
	allowed := append(append([]uintptr{}, baseSyscalls...), p.extra...)
	if len(p.sockets) > 0 {
		allowed = append(allowed, unix.SYS_CONNECT)
	}
	for _, nr := range allowed {
		prog = append(prog, lockdown.Insn{Code: jeq, K: uint32(nr), Jt: "allow"})
	}
	prog = append(prog, lockdown.Insn{Code: ret, K: seccompRetErrno | uint32(unix.EPERM)}) // the default

	// clone: threads only (CLONE_THREAD), never a namespace.
	prog = append(prog,
		lockdown.Insn{Label: "clone", Code: ldW, K: offArg0},
		lockdown.Insn{Code: jset, K: nsCloneFlags, Jt: "eperm"},
		lockdown.Insn{Code: jset, K: unix.CLONE_THREAD, Jt: "allow", Jf: "eperm"},
	)
	// openat: read-only, never creating (no O_WRONLY, O_RDWR, O_CREAT,
	// O_TRUNC, O_TMPFILE): a locked-down process writes only to
	// descriptors it opened before.
	prog = append(prog,
		lockdown.Insn{Label: "openat", Code: ldW, K: offArg2},
		lockdown.Insn{Code: jset, K: unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | oTmpfileBit, Jt: "eperm", Jf: "allow"},
	)
	// fcntl: what Go's os, net and poll packages use. Not F_SETOWN or
	// F_SETSIG (SIGIO, or any signal, to another process), leases,
	// notifications or locks.
	prog = append(prog, lockdown.Insn{Label: "fcntl", Code: ldW, K: offArg1})
	for _, cmd := range []uint32{unix.F_DUPFD, unix.F_DUPFD_CLOEXEC, unix.F_GETFD, unix.F_SETFD,
		unix.F_GETFL, unix.F_SETFL, unix.F_GETPIPE_SZ, unix.F_SETPIPE_SZ} {
		prog = append(prog, lockdown.Insn{Code: jeq, K: cmd, Jt: "allow"})
	}
	prog = append(prog, lockdown.Insn{Code: ret, K: seccompRetErrno | uint32(unix.EPERM)})
	// kill: itself (the Go runtime raises fatal signals so) and the
	// profile's targets; never a process group or -1.
	prog = append(prog, lockdown.Insn{Label: "killcall", Code: ldW, K: offArg0})
	for _, pid := range append([]int{self}, p.signals...) {
		if pid > 0 {
			prog = append(prog, lockdown.Insn{Code: jeq, K: uint32(pid), Jt: "allow"})
		}
	}
	prog = append(prog, lockdown.Insn{Code: ret, K: seccompRetErrno | uint32(unix.EPERM)})
	// tgkill: its own threads only (preemption signals).
	prog = append(prog,
		lockdown.Insn{Label: "tgkill", Code: ldW, K: offArg0},
		lockdown.Insn{Code: jeq, K: uint32(self), Jt: "allow", Jf: "eperm"},
	)
	// prctl: naming its own mappings only (so never PR_SET_DUMPABLE back).
	prog = append(prog,
		lockdown.Insn{Label: "prctl", Code: ldW, K: offArg0},
		lockdown.Insn{Code: jeq, K: prSetVMA, Jt: "allow", Jf: "eperm"},
	)
	if len(p.sockets) > 0 {
		// socket(family, type|flags, 0) for the profile's pairs.
		prog = append(prog,
			lockdown.Insn{Label: "socket", Code: ldW, K: offArg2},
			lockdown.Insn{Code: jeq, K: 0, Jf: "eperm"},
		)
		for i, s := range p.sockets {
			next := fmt.Sprintf("socket%d", i+1)
			if i == len(p.sockets)-1 {
				next = "eperm"
			}
			prog = append(prog,
				lockdown.Insn{Label: fmt.Sprintf("socket%d", i), Code: ldW, K: offArg0},
				lockdown.Insn{Code: jeq, K: s.family, Jf: next},
				lockdown.Insn{Code: ldW, K: offArg1},
				lockdown.Insn{Code: and, K: 0xf}, // SOCK_TYPE_MASK
				lockdown.Insn{Code: jeq, K: s.typ, Jt: "allow", Jf: next},
			)
		}
	}
	prog = append(prog,
		lockdown.Insn{Label: "allow", Code: ret, K: seccompRetAllow},
		lockdown.Insn{Label: "eperm", Code: ret, K: seccompRetErrno | uint32(unix.EPERM)},
		lockdown.Insn{Label: "enosys", Code: ret, K: seccompRetErrno | uint32(unix.ENOSYS)},
		lockdown.Insn{Label: "kill", Code: ret, K: seccompRetKillProcess},
	)
	return lockdown.Assemble(prog)
}
