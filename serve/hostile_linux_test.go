package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/serve"
)

// TestGuestOutputCannotForgeLogLines plays a guest that writes a terminal
// escape and a forged log line to its episode's output (the agent's
// standard error), then kills the agent so that the episode ends by itself
// and the server logs that output. Every log line must be one of the
// server's own ("episode ID: …" of this episode) and hold no control
// character: before, the output went into the log raw, so the guest wrote
// whole lines of its own (here one saying another episode was torn down)
// and drove the terminal of whoever read the log.
func TestGuestOutputCannotForgeLogLines(t *testing.T) {
	need(t)
	var mu sync.Mutex
	var log bytes.Buffer
	_, a := startServer(t, serve.Config{Logf: func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&log, f+"\n", args...)
	}})
	in := a.create(map[string]any{"spec": busybox()})
	const forged = "episode 0123456789abcdef: torn down (ttl) in 1ms"
	shell := `printf '\033]0;pwned\007\033[2J\r\n` + forged + `\n' >/proc/$PPID/fd/2; kill -9 $PPID`
	b, _ := json.Marshal(map[string]any{"shell": shell})
	var out []byte
	a.do("POST", "/v1/episodes/"+in.ID+"/exec", bytes.NewReader(b), &out) // the agent dies under it
	deadline := time.Now().Add(30 * time.Second)
	for {
		var e map[string]any
		if code, _ := a.do("GET", "/v1/episodes/"+in.ID, nil, &e); code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the episode whose agent was killed is still there after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	got := log.String()
	mu.Unlock()
	if !strings.Contains(got, "exited by itself") || !strings.Contains(got, "pwned") {
		t.Fatalf("the log does not show the episode's end with its output:\n%s", got)
	}
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if !strings.HasPrefix(l, "episode "+in.ID+": ") {
			t.Errorf("a log line the server did not write: %q", l)
		}
		if strings.ContainsFunc(l, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("a log line holds control characters: %q", l)
		}
	}
}
