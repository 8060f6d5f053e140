package gvx

import (
	"context"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostiletest"
)

// TestWaitDockerHostileDaemon plays the guest's Docker daemon against the
// host's readiness probe (gvx.DockerReady's): a status line whose reason
// is an escape sequence and a forged line must reach the caller's error
// quoted (it was printed raw before); a daemon that sends 200 and then
// drips nothing must not pass (before, the body read that the deadline cut
// short was ignored and WaitDocker said ready); and no answer, a silent
// one or a body without end may cost more than the caller's deadline.
func TestWaitDockerHostileDaemon(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		sock := hostiletest.RawHTTP(t, "HTTP/1.1 503 \x1b]0;pwned\x07\x1b[2J\rforged: ready\r\nContent-Length: 0\r\n\r\n", false)
		// Long enough for a first answer on a loaded host (CI's first run
		// had none within 200 ms, so no status line to check): WaitDocker
		// keeps asking until the deadline and reports the last answer.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		err := WaitDocker(ctx, sock, nil)
		if err == nil {
			t.Fatal("a daemon answering 503 passed")
		}
		if msg := err.Error(); strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !strings.Contains(msg, `\x1b]0;pwned`) {
			t.Errorf("the daemon's status line reaches the caller unquoted: %q", msg)
		}
	})
	for name, answer := range map[string]string{
		"silent body":  "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
		"endless body": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("400\r\n"+strings.Repeat("x", 1024)+"\r\n", 2048),
		"no headers":   "",
	} {
		t.Run(name, func(t *testing.T) {
			sock := hostiletest.RawHTTP(t, answer, true)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			t0 := time.Now()
			err := WaitDocker(ctx, sock, nil)
			if d := time.Since(t0); d > 3*time.Second {
				t.Errorf("WaitDocker took %v past a 300 ms deadline", d)
			}
			if err == nil && name != "endless body" {
				t.Errorf("a daemon that never finished its answer passed")
			}
		})
	}
}
