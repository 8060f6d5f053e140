package runtime

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
)

// The Go collector of a restoring sandbox (docs/runtime.md, "Where a
// restore's time goes"). gVisor's decoder turns the saved kernel into a
// few hundred thousand small objects as fast as it can allocate them, and
// at the default GOGC the Sentry's heap, still a few MiB when the restore
// starts, doubles several times on the way: each doubling is one more
// concurrent mark of a heap that is nearly all live, for nothing. gVisor
// sets neither GOGC nor a memory limit (runsc has no option for either;
// the Sentry's Go runtime reads GOGC and GOMEMLIMIT from its environment
// only). So rungv run holds the sandbox's collector off while it
// restores: the sandbox turns it off (debug.SetGCPercent(-1)), bounded by
// bootGCLimit (debug.SetMemoryLimit: the collector runs anyway should the
// heap get there), and turns it back to Go's defaults once the
// descriptor bootGCEnv names reads end of file: rungv run closes its end
// when the restore RPC has returned, and the kernel closes it should rungv
// run die first.

// bootGCEnv carries, to a seccomp-only sandbox process, the descriptor
// number of the read end of a pipe: while it is open the sandbox's
// collector is held off (holdBootGC).
const bootGCEnv = "GVX_BOOT_GC"

// bootGCLimit is the Go memory limit of a sandbox whose collector is held
// off: several times what the restore of a booted dockerd's checkpoint
// allocates (the Sentry's Go heap of such an episode is some tens of
// MiB), and small next to the guest's memory.
const bootGCLimit = 512 << 20

// holdBootGC is Main's hook for the sandbox process (args are
// os.Args[1:]): with bootGCEnv set it turns the collector off until the
// descriptor named there reads end of file, then back to what it was.
// It runs after confineBoot, in the process that runs runsc's code.
func holdBootGC(args []string) {
	v, ok := os.LookupEnv(bootGCEnv)
	if !ok || !isBoot(args) {
		return
	}
	os.Unsetenv(bootGCEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "rungv: sandbox: %s=%q is no descriptor number\n", bootGCEnv, v)
		os.Exit(125)
	}
	unix.CloseOnExec(fd)
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(bootGCLimit)
	go func() {
		var b [1]byte
		for {
			// A blocking read: the Sentry's seccomp filter, installed
			// meanwhile, allows read and close.
			if _, err := unix.Read(fd, b[:]); err != unix.EINTR {
				break
			}
		}
		unix.Close(fd)
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(percent)
	}()
}

// gcHold is rungv run's end of a sandbox's bootGCEnv pipe.
type gcHold struct{ w *os.File }

// holdGC makes the pipe, adds its read end to files and returns the
// sandbox's environment entry for it.
func (h *gcHold) holdGC(files *fileList) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("seccomp-only: restore: %w", err)
	}
	h.w = w
	return bootGCEnv + "=" + files.add(r), nil
}

// release lets the sandbox's collector run again (nil-safe, idempotent).
func (h *gcHold) release() {
	if h != nil && h.w != nil {
		h.w.Close()
		h.w = nil
	}
}
