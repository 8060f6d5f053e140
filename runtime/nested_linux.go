package runtime

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/hostarch"
)

// gVisor inside gVisor (a rungv episode running rungv, GKE Sandbox, …).
//
// gVisor's systrap platform places each guest process's stub at the top of
// the address space it believes it has, linux.TaskSize, which package
// linux probes at init with mmap(2) of an unaligned MAP_FIXED address just
// below each feasible size, expecting Linux's answers (ENOMEM above
// TASK_SIZE, EINVAL below). Inside an outer Sentry neither answer holds:
// it checks alignment first (EINVAL for every size, so a nested Sentry
// believes in 56 bits), and what it lets its guests map ends below its own
// stub region (about 0x7f0000000000 of 47 bits). The nested Sentry then
// fails to map its stub 32 times and panics ("failed to map stub"), which
// rungv reported as "the sandbox failed to boot (exit status 2)".
//
// gVisor is a dependency, not a fork: the sandbox process (rungv's "boot",
// before runsc's code runs) measures the highest address it can really map
// and sets systrap's address-space bounds from it, the values systrap's
// own initialisation would have computed from a correct TaskSize. Nothing
// else reads them (the ptrace and kvm platforms are not used nested), and
// systrap reads them only when the platform is created, after this.
// The names are pinned by go.mod's gVisor version; a rename fails the
// build, not an episode.

//go:linkname systrapMaximumUserAddress gvisor.dev/gvisor/pkg/sentry/platform/systrap.maximumUserAddress
var systrapMaximumUserAddress uintptr

//go:linkname systrapStubInitAddress gvisor.dev/gvisor/pkg/sentry/platform/systrap.stubInitAddress
var systrapStubInitAddress uintptr

//go:linkname systrapMaxRandomOffset gvisor.dev/gvisor/pkg/sentry/platform/systrap.maxRandomOffsetOfStubAddress
var systrapMaxRandomOffset uintptr

//go:linkname systrapMaxStubUserAddress gvisor.dev/gvisor/pkg/sentry/platform/systrap.maxStubUserAddress
var systrapMaxStubUserAddress uintptr

//go:linkname systrapStubStart gvisor.dev/gvisor/pkg/sentry/platform/systrap.stubStart
var systrapStubStart uintptr

var _ unsafe.Pointer // go:linkname needs package unsafe

// fitNestedAddressSpace sets systrap's bounds to the address space this
// process really has, when that is less than what systrap computed. It
// runs in the sandbox process (Main, for runsc's boot) inside gVisor only.
func fitNestedAddressSpace() error {
	top := mappableTop()
	if top == 0 {
		return fmt.Errorf("nested gVisor: found no mappable address below %#x", systrapMaximumUserAddress)
	}
	if top >= systrapMaximumUserAddress {
		return nil // systrap's own bounds fit
	}
	page := uintptr(hostarch.PageSize)
	systrapMaximumUserAddress = top
	systrapStubInitAddress = top
	systrapStubStart = top
	systrapMaxRandomOffset = (top >> 7) &^ (page - 1)
	systrapMaxStubUserAddress = top - systrapMaxRandomOffset
	return nil
}

// mappableTop is the end of the highest page this process can map (a
// page already mapped counts), found by bisection between 2^32 and
// systrap's maximum: 0 if none is.
func mappableTop() uintptr {
	page := uintptr(hostarch.PageSize)
	can := func(addr uintptr) bool {
		r, _, errno := unix.RawSyscall6(unix.SYS_MMAP, addr, page, unix.PROT_NONE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0)
		switch {
		case errno == unix.EEXIST:
			return true
		case errno != 0:
			return false
		case r != addr: // a kernel that ignores MAP_FIXED_NOREPLACE
			_, _, _ = unix.RawSyscall(unix.SYS_MUNMAP, r, page, 0)
			return false
		}
		_, _, _ = unix.RawSyscall(unix.SYS_MUNMAP, r, page, 0)
		return true
	}
	lo, hi := uintptr(1)<<32, systrapMaximumUserAddress // lo mappable (assumed), hi not
	if !can(lo) {
		return 0
	}
	for hi-lo > page {
		mid := (lo + (hi-lo)/2) &^ (page - 1)
		if mid == lo {
			break
		}
		if can(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + page
}

// fitNestedIfBoot is Main's hook for the sandbox process: args are
// runsc's.
func fitNestedIfBoot(args []string) {
	if !isBoot(args) || !inGVisor() {
		return
	}
	if err := fitNestedAddressSpace(); err != nil {
		fmt.Fprintln(os.Stderr, "rungv:", err)
	}
}

// isBoot tells runsc's sandbox command ("boot" after global flags).
func isBoot(args []string) bool {
	for _, a := range args {
		if a == "boot" {
			return true
		}
		if len(a) == 0 || a[0] != '-' {
			return false
		}
	}
	return false
}

// nestedRunscFlags are runsc's flags inside gVisor:
// --systrap-disable-syscall-patching. With patching on, inside a rungv
// episode the inner guest hung right after systrap patched its first
// syscall instruction (the patched code jumps through the stub's GS base,
// gs:0x..., which runsc's own flag help names as the thing that breaks);
// with it off, syscalls trap every time, which costs speed, not
// correctness.
var nestedRunscFlags = []string{"--systrap-disable-syscall-patching"}

// nestedPatch is the gVisor patch that nested mode needs
// (patches/gvisor/0004-nested-fault-access.patch): inside another gVisor
// sandbox the outer Sentry delivers the stubs' page faults without an error
// code (gVisor issue 159), and without the patch the inner Sentry takes
// every demand fault for the application's crash.
const nestedPatch = "0004-nested-fault-access"

// nestedFixes are the other patches nested mode relies on, with what an
// episode nested without each gets wrong: rungv runs without them (single
// threaded guests work) and rungv info names the ones a build lacks.
var nestedFixes = []struct{ patch, without string }{
	{"0010-nested-stray-sigsys", "a multi-threaded program's system call may be served with another thread's registers (Go programs, containerd and dockerd die)"},
	{"0011-nested-lost-wake", "an inner episode may never end (its Sentry waits for ever for a stub's reply whose wake the outer lost)"},
	{"0013-nested-keep-trap-table", "an inner episode may never end under an outer that patches system calls (a stub loses the outer's trap table, dies of SIGSEGV, and the Sentry waits for its reply)"},
	{"0015-nested-private-code", "a program run a second time in an inner episode may die of SIGSEGV at its start, and the outer's syscall patches change the inner guest's files (its binary's code)"},
}

// NestedMode says whether this build runs episodes inside a gVisor sandbox
// (rungv info).
type NestedMode struct {
	// Available: this binary has the gVisor patch nested mode needs.
	Available bool `json:"available"`
	// Active: this host is itself a gVisor sandbox, so episodes run
	// nested here.
	Active bool   `json:"active"`
	Why    string `json:"why"`
}

// nestedInfo is NestedMode for this binary; inGV is whether this host is
// a gVisor sandbox.
func nestedInfo(inGV bool) NestedMode {
	m := NestedMode{Available: HasGVisorPatch(nestedPatch), Active: inGV}
	switch {
	case m.Available && inGV:
		m.Why = "inside gVisor: episodes run nested (seccomp-only; page faults without an error code are inferred, patch " + nestedPatch + ")"
	case m.Available:
		m.Why = "this build can run episodes inside a gVisor sandbox (patch " + nestedPatch + "); this host is not one"
	case inGV:
		m.Why = "inside gVisor, but this build lacks gVisor patch " + nestedPatch + ": rungv run refuses (every guest program would die of SIGSEGV at its first page fault); build with scripts/build.sh"
	default:
		m.Why = "this build lacks gVisor patch " + nestedPatch + ": it cannot run episodes inside a gVisor sandbox; build with scripts/build.sh"
	}
	if m.Available {
		for _, f := range nestedFixes {
			if !HasGVisorPatch(f.patch) {
				m.Why += "; without gVisor patch " + f.patch + " " + f.without
			}
		}
	}
	return m
}

// checkNested refuses to start an episode inside gVisor with a build that
// lacks nestedPatch: its guest would die of SIGSEGV at its first
// instruction, which says nothing of the cause.
func checkNested(inGV bool) error {
	if !inGV || HasGVisorPatch(nestedPatch) {
		return nil
	}
	return fmt.Errorf("%w: this host is a gVisor sandbox and this rungv was built without gVisor patch %s: the outer Sentry delivers page faults without an error code (gVisor issue 159) and every guest program would die of SIGSEGV at its first page fault; build rungv with scripts/build.sh (docs/gvisor-patches.md, docs/kubernetes.md \"Inside gVisor\")", ErrUnsupported, nestedPatch)
}
