package serve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostiletest"
)

// proxyTo is a server with one running episode whose agent is at sock,
// and the proxy handler for path; the episode's teardown is end().
func proxyTo(t *testing.T, sock, path string) (h http.Handler, end func()) {
	t.Helper()
	s := &Server{metrics: newMetrics(), eps: map[string]*episode{}, ended: map[string]string{}}
	e := &episode{id: "e1", state: StateRunning, runDone: make(chan struct{}), agent: agentClient(sock)}
	s.eps[e.id] = e
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/episodes/{id}/x", s.proxy(path, 0, 0))
	return mux, func() { close(e.runDone) }
}

// TestProxyHostileAgent plays an agent the guest replaced, against the
// server's proxy: only the three headers the API names pass, and only in
// their forms (a mode that is not one to five octal digits is dropped:
// before, the agent's X-Gvx-Mode went to the client as it was; the length
// is the one Go parsed); headers past 64 KiB, a body shorter
// than its Content-Length, and an agent that never answers end the request
// (the last when its episode is torn down) instead of pinning it.
func TestProxyHostileAgent(t *testing.T) {
	get := func(t *testing.T, h http.Handler, ctx context.Context) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, "GET", "/v1/episodes/e1/x?path=/etc", nil)
		h.ServeHTTP(rec, req)
		return rec
	}
	t.Run("headers", func(t *testing.T) {
		sock := hostiletest.RawHTTP(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Gvx-Mode: 0644; 077777777777\r\nSet-Cookie: s=1\r\nLocation: /etc\r\nX-Gvx-Other: 1\r\nContent-Length: 2\r\n\r\nok", false)
		h, end := proxyTo(t, sock, "/file")
		defer end()
		rec := get(t, h, context.Background())
		if rec.Code != 200 || rec.Body.String() != "ok" {
			t.Fatalf("answer %d %q", rec.Code, rec.Body)
		}
		for k, v := range rec.Header() {
			switch k {
			case "Content-Type", "Content-Length":
			default:
				t.Errorf("the agent's header %s: %q reached the client", k, v)
			}
		}
		if rec.Header().Get("Content-Length") != "2" {
			t.Errorf("Content-Length %q, want 2", rec.Header().Get("Content-Length"))
		}
	})
	t.Run("mode", func(t *testing.T) {
		sock := hostiletest.RawHTTP(t, "HTTP/1.1 200 OK\r\nX-Gvx-Mode: 04755\r\nContent-Length: 0\r\n\r\n", false)
		h, end := proxyTo(t, sock, "/file")
		defer end()
		if m := get(t, h, context.Background()).Header().Get("X-Gvx-Mode"); m != "04755" {
			t.Errorf("a valid mode did not pass: %q", m)
		}
	})
	for name, tc := range map[string]struct {
		answer string
		code   int
		body   string
	}{
		"huge headers": {"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", http.StatusInternalServerError, ""},
		"short body":   {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", 200, "only this"},
	} {
		t.Run(name, func(t *testing.T) {
			h, end := proxyTo(t, hostiletest.RawHTTP(t, tc.answer, false), "/file")
			defer end()
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() { done <- get(t, h, context.Background()) }()
			select {
			case rec := <-done:
				if rec.Code != tc.code || (tc.body != "" && rec.Body.String() != tc.body) {
					t.Errorf("answer %d %q, want %d %q", rec.Code, rec.Body, tc.code, tc.body)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the proxy still waits on the agent after 10 s")
			}
		})
	}
	t.Run("silent", func(t *testing.T) {
		h, end := proxyTo(t, hostiletest.RawHTTP(t, "", true), "/exec")
		done := make(chan struct{})
		go func() { get(t, h, context.Background()); close(done) }()
		time.Sleep(100 * time.Millisecond)
		end() // the episode's teardown
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a request to a silent agent outlived its episode's teardown by 10 s")
		}
		ctx, cancel := context.WithCancel(context.Background())
		h, end = proxyTo(t, hostiletest.RawHTTP(t, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true), "/exec")
		defer end()
		done = make(chan struct{})
		go func() { get(t, h, ctx); close(done) }()
		time.Sleep(100 * time.Millisecond)
		cancel() // the client gave up
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a request to an agent that sent headers and then nothing outlived its client by 10 s")
		}
	})
}

// endlessAgent plays an agent the guest replaced that answers every
// request with head and then bytes until the reader goes away (none held
// in memory: a 1.5 GB answer is streamed as it is written).
func endlessAgent(t *testing.T, head string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "endless-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); os.RemoveAll(dir) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				chunk := bytes.Repeat([]byte(" "), 64<<10)
				for n := 0; n < 1_500_000_000; n += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}

// TestProxyAgentAnswerCap plays an agent that answers write_file's and
// upload's PUT with 1.5 GB: the server relays at most maxAgentAnswer
// bytes of it. With its length said, the answer is refused with 502; as a
// stream, the connection is cut past the cap, so the client sees a broken
// answer rather than a short one. Before, all of it went through to a
// client that reads that answer whole (the Python client read 2.8 GiB).
func TestProxyAgentAnswerCap(t *testing.T) {
	for name, head := range map[string]string{
		"length": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1500000000\r\n\r\n",
		"stream": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			s := &Server{metrics: newMetrics(), eps: map[string]*episode{}, ended: map[string]string{}}
			e := &episode{id: "e1", state: StateRunning, runDone: make(chan struct{}), agent: agentClient(endlessAgent(t, head))}
			defer close(e.runDone)
			s.eps[e.id] = e
			mux := http.NewServeMux()
			mux.HandleFunc("PUT /v1/episodes/{id}/files", s.proxy("/file", 1<<20, maxAgentAnswer))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			req, _ := http.NewRequest("PUT", srv.URL+"/v1/episodes/e1/files?path=/x", strings.NewReader("data"))
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			n, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 16<<20))
			switch {
			case name == "length" && resp.StatusCode != http.StatusBadGateway:
				t.Errorf("status %d (%d bytes relayed), want 502", resp.StatusCode, n)
			case name == "stream" && (rerr == nil || n > maxAgentAnswer):
				t.Errorf("%d bytes relayed, then %v: want at most %d, then a broken answer", n, rerr, maxAgentAnswer)
			}
		})
	}
}
