package serve_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/serve"
)

// fork asks for n children of id and returns them (or fails the test
// unless want is the status expected).
func (a *api) fork(id string, n int, want int) ([]serve.EpisodeInfo, string) {
	a.t.Helper()
	b, _ := json.Marshal(serve.ForkRequest{N: n, TTL: 600})
	var raw []byte
	code, _ := a.do("POST", "/v1/episodes/"+id+"/fork", bytes.NewReader(b), &raw)
	if code != want {
		a.t.Fatalf("fork %s: %d %s (want %d)", id, code, raw, want)
	}
	var r serve.ForkReply
	json.Unmarshal(raw, &r)
	return r.Episodes, string(raw)
}

// counterNow reads the guest's counter (a background process writing
// /data/count every 20 ms). The shell's `echo $i > /data/count` truncates
// before it writes, so a read can meet the file empty: it reads again
// then (about one run in eight failed on that before).
func (a *api) counterNow(id string) int {
	a.t.Helper()
	var r execResult
	for range 5 {
		r = a.exec(id, agent.ExecRequest{Shell: "cat /data/count"})
		if n, err := strconv.Atoi(strings.TrimSpace(r.stdout)); err == nil {
			return n
		} else if r.stdout != "" || r.code != 0 {
			break
		}
	}
	a.t.Fatalf("episode %s: /data/count: %+v", id, r)
	return 0
}

// TestFork: POST /v1/episodes/{id}/fork of a forkable episode makes N
// running episodes that continue from its state: the file it wrote is in
// each, its background process goes on counting in each from the value
// at the fork (processes and memory, not only files), and parent and
// children diverge independently (a file one writes is absent in the
// others); the parent cannot be forked twice, a non-forkable one not at
// all, and a namespaced forkable create is refused.
func TestFork(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	p := a.create(map[string]any{"spec": busybox(), "golden": golden, "golden_target": "/data", "forkable": true, "ttl": 600})
	if !p.Forkable {
		t.Fatalf("create: %+v", p)
	}
	a.exec(p.ID, agent.ExecRequest{Shell: "echo prefix > /data/prefix.txt; (i=0; while :; do i=$((i+1)); echo $i > /data/count; sleep 0.02; done) >/dev/null 2>&1 </dev/null &"})
	time.Sleep(300 * time.Millisecond)
	before := a.counterNow(p.ID)

	kids, _ := a.fork(p.ID, 2, http.StatusCreated)
	if len(kids) != 2 {
		t.Fatalf("fork: %d children", len(kids))
	}
	after := a.counterNow(p.ID)
	ids := map[string]bool{p.ID: true}
	for _, k := range kids {
		if ids[k.ID] || k.State != serve.StateRunning || k.Parent != p.ID || k.Volume == "" || k.Volume == p.Volume {
			t.Fatalf("child %+v", k)
		}
		ids[k.ID] = true
		if r := a.exec(k.ID, agent.ExecRequest{Shell: "cat /data/prefix.txt /data/golden.txt"}); r.stdout != "prefix\ngv\n" {
			t.Errorf("child %s: files %+v", k.ID, r)
		}
		c1 := a.counterNow(k.ID)
		time.Sleep(200 * time.Millisecond)
		c2 := a.counterNow(k.ID)
		if c1 < before || c2 <= c1 {
			t.Errorf("child %s: counter %d then %d; the parent's was %d before the fork: its process did not continue", k.ID, c1, c2, before)
		}
	}
	if after < before {
		t.Errorf("parent's counter went back: %d → %d", before, after)
	}

	// Each writes its own file; nobody sees another's.
	all := append([]serve.EpisodeInfo{p}, kids...)
	for _, e := range all {
		a.exec(e.ID, agent.ExecRequest{Shell: "echo me > /data/own-" + e.ID})
	}
	for _, e := range all {
		r := a.exec(e.ID, agent.ExecRequest{Shell: "ls /data | grep own- | tr '\\n' ' '"})
		if strings.TrimSpace(r.stdout) != "own-"+e.ID {
			t.Errorf("episode %s sees %q, want only its own file", e.ID, r.stdout)
		}
	}

	if _, raw := a.fork(p.ID, 1, http.StatusConflict); !strings.Contains(raw, "is not forkable: it was forked already") {
		t.Errorf("second fork: %s", raw)
	}
	if _, raw := a.fork(kids[0].ID, 1, http.StatusConflict); !strings.Contains(raw, "is not forkable: create it with") {
		t.Errorf("fork of a non-forkable child: %s", raw)
	}
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"image": env.ImageRef, "isolation": "namespaces"}, "forkable": true})
	var raw []byte
	if code, _ := a.do("POST", "/v1/episodes", bytes.NewReader(b), &raw); code != http.StatusBadRequest || !strings.Contains(string(raw), "seccomp-only") {
		t.Errorf("namespaced forkable create: %d %s", code, raw)
	}
	for _, e := range all {
		if code, _ := a.do("DELETE", "/v1/episodes/"+e.ID, nil, nil); code != http.StatusNoContent {
			t.Errorf("delete %s: %d", e.ID, code)
		}
	}
}

// TestForkBadRequests: a fork body the server must not act on is refused
// before anything is admitted or saved: n out of 1..64 (the bound keeps
// one request from asking for millions of restores), a negative ttl, a
// number that is not an int, unknown fields, trailing JSON, a body over
// its limit; an unknown episode is 404, one not created forkable 409. The
// episode forked at is untouched: still running, the only one live.
func TestForkBadRequests(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	in := a.create(map[string]any{"spec": map[string]any{"image": env.ImageRef}})
	for _, tc := range []struct {
		id, body string
		code     int
		msg      string
	}{
		{in.ID, `{"n":0}`, 400, "n must be 1..64"},
		{in.ID, `{}`, 400, "n must be 1..64"},
		{in.ID, `{"n":65}`, 400, "n must be 1..64"},
		{in.ID, `{"n":-1}`, 400, "n must be 1..64"},
		{in.ID, `{"n":1000000000000}`, 400, "n must be 1..64"},
		{in.ID, `{"n":9223372036854775808}`, 400, "bad request"},
		{in.ID, `{"n":1.5}`, 400, "bad request"},
		{in.ID, `{"n":"2"}`, 400, "bad request"},
		{in.ID, `{"n":2,"ttl":-1}`, 400, "ttl not negative"},
		{in.ID, `{"n":2,"spec":{"image":"x"}}`, 400, "unknown field"},
		{in.ID, `{"n":2} {"n":64}`, 400, "more than one JSON value"},
		{in.ID, `{"n":2,"ttl":` + strings.Repeat("1", 1<<20) + `}`, 413, "too large"},
		{in.ID, `{`, 400, "bad request"},
		{"0000000000000000", `{"n":2}`, 404, ""},
		{in.ID, `{"n":2}`, 409, "episode " + in.ID + " is not forkable: create it with \"forkable\": true"},
		{in.ID, `{"n":64}`, 409, "is not forkable: create it with"},
	} {
		var e map[string]string
		code, _ := a.do("POST", "/v1/episodes/"+tc.id+"/fork", strings.NewReader(tc.body), &e)
		if code != tc.code || !strings.Contains(e["error"], tc.msg) {
			b := tc.body
			if len(b) > 60 {
				b = b[:60] + "…"
			}
			t.Errorf("fork %s %s: %d %q, want %d with %q", tc.id, b, code, e["error"], tc.code, tc.msg)
		}
	}
	if n := a.metric("gvx_serve_episodes_live"); n != 1 {
		t.Errorf("%d episodes live after refused forks, want 1", n)
	}
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "echo ok"}); r.stdout != "ok\n" || r.code != 0 {
		t.Errorf("the episode after refused forks: %+v", r)
	}
}

// TestForkNAT: a forkable episode with "network": "nat" that has used its
// network is forked; each child (a restore with a NAT of its own) reaches
// the test's server on the host's loopback as 10.0.2.2:PORT (the port in
// allow_host_ports), and the metadata address and a host port not allowed
// stay refused in it, as in the parent.
func TestForkNAT(t *testing.T) {
	need(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hi " + r.URL.Query().Get("who")))
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler()) // listening, never allowed
	defer closed.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	other := "10.0.2.2:" + strconv.Itoa(closed.Listener.Addr().(*net.TCPAddr).Port)
	_, a := startServer(t, serve.Config{})
	sp := busybox()
	sp["network"], sp["allow_host_ports"] = "nat", []int{port}
	p := a.create(map[string]any{"spec": sp, "golden": golden, "golden_target": "/data", "forkable": true, "ttl": 600})
	fetch := func(id string) {
		t.Helper()
		url := "http://10.0.2.2:" + strconv.Itoa(port) + "/?who=" + id
		if r := a.exec(id, agent.ExecRequest{Argv: []string{"wget", "-qO-", url}}); r.stdout != "hi "+id {
			t.Errorf("episode %s: fetch from the host's loopback: %+v", id, r)
		}
		for _, dst := range []string{"169.254.169.254", other} {
			if r := a.exec(id, agent.ExecRequest{Argv: []string{"wget", "-qO-", "http://" + dst + "/"}}); r.code == 0 || !strings.Contains(r.stderr, "refused") {
				t.Errorf("episode %s: %s must be refused: %+v", id, dst, r)
			}
		}
	}
	fetch(p.ID)
	kids, _ := a.fork(p.ID, 2, http.StatusCreated)
	for _, e := range append(kids, p) {
		fetch(e.ID)
	}
}

// TestForkRefusedThenRetried: a fork gVisor cannot take (an exec of the
// episode streams while it is asked: a connection being served cannot be
// saved) is refused with 409 and one line, before it touches the parent:
// the parent runs on (its counter goes on, it answers), no child is left,
// and once the exec is over the same episode forks (it was refused for
// good with 409 "forked already" before).
func TestForkRefusedThenRetried(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	p := a.create(map[string]any{"spec": busybox(), "golden": golden, "golden_target": "/data", "forkable": true, "ttl": 600})
	a.exec(p.ID, agent.ExecRequest{Shell: "(i=0; while :; do i=$((i+1)); echo $i > /data/count; sleep 0.02; done) >/dev/null 2>&1 </dev/null &"})

	// An exec in flight: its stream is open until it prints "done".
	stream, closeStream := a.execStream(p.ID, "echo started; sleep 8; echo done", "started")
	before := a.counterNow(p.ID)
	_, raw := a.fork(p.ID, 2, http.StatusConflict)
	var e map[string]string
	json.Unmarshal([]byte(raw), &e)
	if msg := e["error"]; !strings.Contains(msg, "runs on unchanged") || strings.Contains(msg, "goroutine") || len(msg) > 1000 {
		t.Errorf("refused fork: %s", raw)
	}
	for stream.Scan() {
	}
	closeStream()
	if n := a.metric("gvx_serve_episodes_live"); n != 1 {
		t.Errorf("%d episodes live after the refused fork, want 1", n)
	}
	if after := a.counterNow(p.ID); after <= before {
		t.Errorf("the parent's counter stopped after the refused fork: %d then %d", before, after)
	}

	kids, _ := a.fork(p.ID, 1, http.StatusCreated)
	if len(kids) != 1 {
		t.Fatalf("retried fork: %d children", len(kids))
	}
	if c := a.counterNow(kids[0].ID); c < before {
		t.Errorf("child's counter %d, the parent's was %d before: its process did not continue", c, before)
	}
	if r := a.exec(p.ID, agent.ExecRequest{Shell: "echo ok"}); r.stdout != "ok\n" {
		t.Errorf("the parent after the retried fork: %+v", r)
	}
}
