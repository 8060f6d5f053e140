package main

import (
	"strings"
	"testing"
	"time"
)

// TestDockerStopPID1: `docker stop -t 2` of a container whose PID 1 has
// no SIGTERM handler (busybox sleep) waits out the timeout and ends it
// with SIGKILL, exit status 137, as Docker on Linux does: the init of a
// pid namespace ignores a signal it has no handler for (pid_namespaces(7)),
// and only the parent namespace's SIGKILL ends it. Inside an episode the
// SIGTERM used to kill it at once (exit 143 in a fraction of a second),
// so tests of graceful shutdown scored otherwise than in production. A
// container that handles SIGTERM still stops at once. Needs gVisor patch
// 0001-pidns-init-signals.
func TestDockerStopPID1(t *testing.T) {
	needPatch(t, "0001-pidns-init-signals")
	forEachFlavour(t, func(t *testing.T, s dindSetup) {
		tmp, sockDir := privateTmp(t, asRoot), privateTmp(t, asRoot)
		d := startDaemon(t, s, asRoot, tmp, sockDir, "type=tmpfs,dst=/var/lib/docker")
		defer d.stop()
		d.must("load", "-i", s.hello)
		for _, c := range []struct {
			name, script string
			min, max     time.Duration
			code         string
		}{
			{"nohandler", "exec sleep 1000", 1900 * time.Millisecond, 30 * time.Second, "137"},
			{"handler", "trap 'exit 0' TERM; sleep 1000 & wait", 0, 1900 * time.Millisecond, "0"},
		} {
			d.must("run", "-d", "--name", c.name, "hello:latest", "sh", "-c", c.script)
			time.Sleep(300 * time.Millisecond) // the trap set, sleep running
			t0 := time.Now()
			d.must("stop", "-t", "2", c.name)
			took := time.Since(t0)
			code := strings.TrimSpace(d.must("inspect", "-f", "{{.State.ExitCode}}", c.name))
			if took < c.min || took > c.max || code != c.code {
				t.Errorf("%s: docker stop -t 2 took %v and the container exited %s; want %v–%v and %s", c.name, took.Round(time.Millisecond), code, c.min, c.max, c.code)
			}
		}
	})
}
