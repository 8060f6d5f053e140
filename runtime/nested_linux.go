package runtime

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gVisor inside gVisor.
//
// gVisor's systrap platform sizes the address space it may use from
// linux.TaskSize, which package linux probes at init: mmap(2) of an
// unaligned MAP_FIXED address just below each feasible size, largest
// first, expecting Linux's answers: ENOMEM above TASK_SIZE, EINVAL (the
// alignment) below it. An outer gVisor Sentry checks the alignment first
// and answers EINVAL for both, so a nested Sentry believes it has 56 bits
// of address space (5-level paging), places its stub above the outer
// Sentry's 47-bit limit, fails 32 times and panics ("failed to map stub").
//
// gVisor is a dependency, not a fork: instead of changing the probe, the
// host side gives the sandbox, before it starts, a seccomp filter that
// answers that one probe (mmap of exactly that address) with ENOMEM, as
// Linux would. Every other call passes. The filter is this process's too
// (it is inherited at fork and cannot be removed); this process never maps
// that address.

// la57Probe is the address package linux's TaskSize probe maps for a 56-bit
// address space: feasibleTaskSizes[0] - page size - 1 (amd64).
const la57Probe = 0xfffffffffff000 - 4096 - 1

// answerTaskSizeProbe installs the filter (amd64 only; elsewhere it does
// nothing).
func answerTaskSizeProbe() error {
	if goruntime.GOARCH != "amd64" {
		return nil
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	prog, err := assemble([]bpfInsn{
		{code: ld, k: offArch},
		{code: jeq, k: auditArchX8664, jf: "allow"},
		{code: ld, k: offNr},
		{code: jeq, k: unix.SYS_MMAP, jf: "allow"},
		{code: ld, k: offArg0},
		{code: jeq, k: uint32(la57Probe & 0xffffffff), jf: "allow"},
		{code: ld, k: offArg0 + 4},
		{code: jeq, k: uint32(la57Probe >> 32), jf: "allow"},
		{code: ret, k: seccompRetErrno | uint32(unix.ENOMEM)},
		{code: ret, k: seccompRetAllow, label: "allow"},
	})
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("nested gVisor: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("nested gVisor: seccomp: %w", errno)
	}
	return nil
}
