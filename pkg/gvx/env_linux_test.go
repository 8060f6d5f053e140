package gvx_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostiletest"

	"z.gfire.dev/gvx/pkg/gvx"
)

// TestRungvGetsNoCallerSecrets: the caller's environment holds a secret
// (an API key of its own). The rungv process the SDK starts, and every
// process under it (supervisor, sandbox), carry none of it, nor does the
// guest; what rungv needs (TMPDIR) still passes. Before, exec.Cmd gave
// rungv the caller's whole environment, and it went down to every
// process of the episode.
func TestRungvGetsNoCallerSecrets(t *testing.T) {
	need(t)
	const secret = "sk-gvx-caller-secret-51c2"
	t.Setenv("GVX_CALLER_API_KEY", secret)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	sb := newSandbox(t, ctx, gvx.Config{
		Platform: gvx.PlatformAuto, NetworkMode: gvx.NetModeNone,
		Entrypoint: []string{"sh", "-c"}, EntrypointSet: true,
		Cmd:    []string{"env; echo ---; sleep 30"},
		Stdout: &out,
	})
	done := make(chan error, 1)
	go func() { _, err := sb.Run(ctx); done <- err }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "---") {
		if time.Now().After(deadline) {
			t.Fatalf("the guest printed no environment in 60 s: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := hostiletest.Descendants(sb.Pid())
	if len(pids) < 2 {
		t.Fatalf("rungv %d has no processes under it", pids[0])
	}
	for i, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("GVX_CALLER_API_KEY")) {
			t.Errorf("process %d of the episode carries the caller's secret", pid)
		}
		if i == 0 && !bytes.Contains(b, []byte("TMPDIR="+tmp+"\x00")) {
			t.Errorf("rungv lacks TMPDIR, which it needs for its state")
		}
	}
	cancel()
	<-done
	guest, _, _ := strings.Cut(out.String(), "---")
	if strings.Contains(guest, secret) || !strings.Contains(guest, "PATH=/bin") {
		t.Errorf("the guest's environment:\n%s", guest)
	}
}

// lockedBuffer is a bytes.Buffer safe to write while another goroutine
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
