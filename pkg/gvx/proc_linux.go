package gvx

import (
	"os/exec"
	"runtime"
	"syscall"
)

// dieWithCaller makes rungv die (SIGKILL) when the process that started
// it does, so a SIGKILLed pool leaves no episode running. Pdeathsig fires
// when the starting *thread* exits, so the caller's goroutine stays on its
// thread until the episode is over (unpin).
func dieWithCaller(cmd *exec.Cmd) (unpin func()) {
	runtime.LockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return runtime.UnlockOSThread
}
