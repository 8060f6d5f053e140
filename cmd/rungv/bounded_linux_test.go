package main

import (
	"context"
	"os/exec"
	"time"
)

// cmdLimit bounds every command a test of this package starts through
// boundedCommand: the longest (a Compose project built and run inside an
// episode) takes about three minutes on a loaded 2-CPU machine. A command
// that hangs is killed at the limit, so its test fails with its own output
// and the rest of the package still runs, instead of the whole package
// dying at go test's -timeout with no test named.
const cmdLimit = 10 * time.Minute

// boundedCommand is exec.Command with cmdLimit: at the limit the process is
// killed and Wait returns at most 10 s later even if a grandchild still
// holds its output pipes.
func boundedCommand(name string, args ...string) *exec.Cmd {
	// Not cancelled at the test's cleanup: a cleanup registered earlier
	// may still stop the command gracefully, and cleanups run last-first.
	ctx, cancel := context.WithTimeout(context.Background(), cmdLimit)
	time.AfterFunc(cmdLimit, cancel)
	c := exec.CommandContext(ctx, name, args...)
	c.WaitDelay = 10 * time.Second
	return c
}
