package serve

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killIfSame SIGKILLs the rungv process rec names if it is still that
// process — same start time, and running the binary rec names or rungv
// (the server's) — and waits (up to 10 s) for it to be gone. The process
// is held by a pidfd from before the checks to the signal, so a PID
// reused meanwhile is never hit. A process that is not rungv is left
// alone (logged): a record cannot make the server kill anything else.
func killIfSame(rec *record, rungv string, logf func(string, ...any)) error {
	pid, start := rec.RungvPID, rec.RungvStart
	if start == 0 {
		return nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd of rungv %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	// Held by pidfd, the PID names the same process until it is closed.
	if procStart(pid) != start {
		return nil // gone, or the PID is another process now
	}
	if !runsRungv(pid, rec, rungv) {
		logf("episode %s: process %d is not rungv (it runs %s): not killed", rec.ID, pid, exePath(pid))
		return nil
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill rungv %d: %w", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("rungv %d did not die after SIGKILL within 10s", pid)
		}
		// A pidfd polls readable once its process has exited.
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for rungv %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}

// runsRungv reports whether process pid runs the file rec names
// (RungvDev, RungvIno) or the file at path rungv.
func runsRungv(pid int, rec *record, rungv string) bool {
	st, err := os.Stat(exeLink(pid))
	if err != nil {
		return false
	}
	dev, ino, ok := fileID(st)
	if !ok {
		return false
	}
	if rec.RungvIno != 0 && dev == rec.RungvDev && ino == rec.RungvIno {
		return true
	}
	if rungv == "" {
		return false
	}
	rst, err := os.Stat(rungv)
	if err != nil {
		return false
	}
	rdev, rino, ok := fileID(rst)
	return ok && dev == rdev && ino == rino
}

// noteExe records in rec the binary its rungv process runs.
func noteExe(rec *record) {
	rec.RungvExe = exePath(rec.RungvPID)
	if st, err := os.Stat(exeLink(rec.RungvPID)); err == nil {
		rec.RungvDev, rec.RungvIno, _ = fileID(st)
	}
}

func exeLink(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/exe" }

// exePath is what /proc/PID/exe names, for messages and records.
func exePath(pid int) string {
	p, err := os.Readlink(exeLink(pid))
	if err != nil {
		return "?"
	}
	return p
}

func fileID(st os.FileInfo) (dev, ino uint64, ok bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(sys.Dev), sys.Ino, true
}
