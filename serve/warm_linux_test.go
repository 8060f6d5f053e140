package serve_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/serve"
)

// metric reads one gauge or counter from /metrics.
func (a *api) metric(name string) int {
	a.t.Helper()
	var b []byte
	a.do("GET", "/metrics", nil, &b)
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		a.t.Fatalf("no %s in /metrics:\n%s", name, b)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func (a *api) waitMetric(name string, want int) {
	a.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for a.metric(name) != want {
		if time.Now().After(deadline) {
			a.t.Fatalf("%s did not reach %d (it is %d)", name, want, a.metric(name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWarmCreate: with 2 warm episodes of a request, 3 creates of it at
// once get 3 different episodes, 2 of them claimed warm (claim_seconds
// apart from their boot's ready_seconds), each its own clone of the
// golden volume; the server boots the replacements, a request that
// differs (another golden_target) is created cold, and Close (the
// cleanup) leaves no episode directory behind.
func TestWarmCreate(t *testing.T) {
	need(t)
	reqJSON := fmt.Sprintf(`{"spec": {"image": %q}, "golden": %q, "golden_target": "/data"}`, env.ImageRef, golden)
	var warmReq serve.CreateRequest
	if err := json.Unmarshal([]byte(reqJSON), &warmReq); err != nil {
		t.Fatal(err)
	}
	_, a := startServer(t, serve.Config{Warm: []serve.WarmSpec{{Count: 2, Request: warmReq}}})
	a.waitMetric("gvx_serve_warm_ready", 2)
	if a.metric("gvx_serve_episodes_live") != 0 {
		t.Error("warm episodes count as live")
	}

	var mu sync.Mutex
	var eps []serve.EpisodeInfo
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			var req map[string]any
			json.Unmarshal([]byte(reqJSON), &req)
			req["ttl"] = 600
			in := a.create(req)
			mu.Lock()
			eps = append(eps, in)
			mu.Unlock()
		})
	}
	wg.Wait()
	ids, vols, warm := map[string]bool{}, map[string]bool{}, 0
	for _, in := range eps {
		if ids[in.ID] || vols[in.Volume] || in.State != serve.StateRunning {
			t.Errorf("episode %+v handed out twice or not running", in)
		}
		ids[in.ID], vols[in.Volume] = true, true
		if in.Warm {
			warm++
			if in.ClaimSeconds <= 0 || in.ReadySeconds <= 0 || in.IdleMemoryBytes <= 0 {
				t.Errorf("warm episode: %+v", in)
			}
		}
		if r := a.exec(in.ID, agent.ExecRequest{Shell: "cat /data/golden.txt"}); r.stdout != "gv\n" || r.code != 0 {
			t.Errorf("episode %s: %+v", in.ID, r)
		}
		t.Logf("episode %s: warm %v claim %.1fms ready %.0fms idle %d KiB", in.ID, in.Warm, in.ClaimSeconds*1e3, in.ReadySeconds*1e3, in.IdleMemoryBytes>>10)
	}
	if warm != 2 || a.metric("gvx_serve_warm_claims_total") != 2 || a.metric("gvx_serve_episodes_live") != 3 {
		t.Errorf("%d warm claims of 3 (want 2)", warm)
	}
	a.waitMetric("gvx_serve_warm_ready", 2) // the replacements
	var b []byte
	if a.do("GET", "/metrics", nil, &b); !bytes.Contains(b, []byte("gvx_serve_claim_seconds_count 2\n")) {
		t.Errorf("claim histogram:\n%s", b)
	}

	var other map[string]any
	json.Unmarshal([]byte(reqJSON), &other)
	other["golden_target"] = "/other"
	if in := a.create(other); in.Warm {
		t.Errorf("a request no warm spec matches was claimed warm: %+v", in)
	}
}

// TestWarmMemoryCap: Config.WarmMemory holds the waiting warm episodes'
// idle memory under the cap. One episode's cost is measured first; with
// room for two and a half, a set of count 3 keeps exactly 2 warm (a third
// is never kept, however long the server runs); with room for less than
// one, none is kept warm, the server says why, and a create still
// succeeds, cold.
func TestWarmMemoryCap(t *testing.T) {
	need(t)
	reqJSON := fmt.Sprintf(`{"spec": {"image": %q}, "golden": %q, "golden_target": "/data"}`, env.ImageRef, golden)
	var warmReq serve.CreateRequest
	if err := json.Unmarshal([]byte(reqJSON), &warmReq); err != nil {
		t.Fatal(err)
	}
	var one int
	{
		srv, a := startServer(t, serve.Config{Warm: []serve.WarmSpec{{Count: 1, Request: warmReq}}})
		a.waitMetric("gvx_serve_warm_ready", 1)
		one = a.metric("gvx_serve_warm_memory_bytes")
		if one <= 0 {
			t.Fatalf("one warm episode's idle memory: %d", one)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("one warm episode: %d KiB idle", one>>10)

	t.Run("two fit", func(t *testing.T) {
		limit := int64(one) * 5 / 2
		_, a := startServer(t, serve.Config{WarmMemory: limit, Warm: []serve.WarmSpec{{Count: 3, Request: warmReq}}})
		a.waitMetric("gvx_serve_warm_ready", 2)
		for range 20 { // a third would have booted by now: boots take well under 3 s here
			time.Sleep(150 * time.Millisecond)
			if n, m := a.metric("gvx_serve_warm_ready"), a.metric("gvx_serve_warm_memory_bytes"); n > 2 || int64(m) > limit {
				t.Fatalf("%d warm episodes holding %d bytes, over the cap %d", n, m, limit)
			}
		}
		if n := a.metric("gvx_serve_warm_ready"); n != 2 {
			t.Errorf("%d warm episodes, want 2 (cap %d, one %d)", n, limit, one)
		}
	})

	t.Run("none fit", func(t *testing.T) {
		var mu sync.Mutex
		var logs bytes.Buffer
		logf := func(f string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logs, f+"\n", args...)
		}
		_, a := startServer(t, serve.Config{WarmMemory: int64(one) / 2, Warm: []serve.WarmSpec{{Count: 2, Request: warmReq}}, Logf: logf})
		deadline := time.Now().Add(2 * time.Minute)
		for {
			mu.Lock()
			said := bytes.Contains(logs.Bytes(), []byte("no warm episode fits --warm-memory"))
			mu.Unlock()
			if said {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server never said that no warm episode fits; log:\n%s", logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second)
		if n := a.metric("gvx_serve_warm_ready"); n != 0 {
			t.Errorf("%d warm episodes kept under a cap smaller than one", n)
		}
		var req map[string]any
		json.Unmarshal([]byte(reqJSON), &req)
		if in := a.create(req); in.Warm || in.State != serve.StateRunning {
			t.Errorf("create under a cap that fits none: %+v", in)
		}
	})
}

// TestWarmRefillDelay: the replacement of a claimed warm episode boots
// only after Config.RefillDelay (no episode directory of it before), and
// a create that finds the set empty meanwhile ends the wait: its own cold
// boot and the replacement start at once.
func TestWarmRefillDelay(t *testing.T) {
	need(t)
	reqJSON := fmt.Sprintf(`{"spec": {"image": %q}}`, env.ImageRef)
	var warmReq serve.CreateRequest
	if err := json.Unmarshal([]byte(reqJSON), &warmReq); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(shortDir(t), "st")
	_, a := startServer(t, serve.Config{StateDir: dir, RefillDelay: time.Minute, Warm: []serve.WarmSpec{{Count: 1, Request: warmReq}}})
	a.waitMetric("gvx_serve_warm_ready", 1)
	epDirs := func() int {
		ents, err := os.ReadDir(filepath.Join(dir, "ep"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	var req map[string]any
	json.Unmarshal([]byte(reqJSON), &req)
	if in := a.create(req); !in.Warm {
		t.Fatalf("first create was not a claim: %+v", in)
	}
	for range 10 { // 2 s: the reaper's ticks (every 250 ms) must not start it either
		time.Sleep(200 * time.Millisecond)
		if n := epDirs(); n != 1 {
			t.Fatalf("%d episode directories during the refill delay, want only the claimed one", n)
		}
	}
	if in := a.create(req); in.Warm {
		t.Fatalf("second create claimed a warm episode during the delay: %+v", in)
	}
	deadline := time.Now().Add(30 * time.Second) // well inside the minute's delay
	for epDirs() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the replacement did not start after the set ran empty (%d episode directories)", epDirs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.waitMetric("gvx_serve_warm_ready", 1)
}

// TestWarmClaimByBootedState: a create claims a warm episode when it would
// boot the same one, though its JSON differs from the warm request in
// TTL, lease and defaults spelled out (golden_target, spec version); the
// claimed episode has the create's TTL and lease. One that differs in a
// limit (what the episode boots with) is created cold. Before, only TTL
// and lease could differ.
func TestWarmClaimByBootedState(t *testing.T) {
	need(t)
	reqJSON := fmt.Sprintf(`{"spec": {"image": %q}, "golden": %q}`, env.ImageRef, golden)
	var warmReq serve.CreateRequest
	if err := json.Unmarshal([]byte(reqJSON), &warmReq); err != nil {
		t.Fatal(err)
	}
	_, a := startServer(t, serve.Config{Warm: []serve.WarmSpec{{Count: 1, Request: warmReq}}})
	a.waitMetric("gvx_serve_warm_ready", 1)
	same := map[string]any{"spec": map[string]any{"version": 1, "image": env.ImageRef}, "golden": golden,
		"golden_target": serve.DefaultGoldenTarget, "ttl": 300, "lease": 45}
	in := a.create(same)
	if !in.Warm || in.LeaseSeconds != 45 || in.ExpiresAt.Sub(in.Created) != 300*time.Second {
		t.Errorf("a create that boots the same episode: %+v (want claimed warm, lease 45 s, TTL 300 s)", in)
	}
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "cat /var/lib/docker/golden.txt"}); r.stdout != "gv\n" {
		t.Errorf("claimed episode's golden: %+v", r)
	}
	a.waitMetric("gvx_serve_warm_ready", 1) // the replacement
	other := map[string]any{"spec": map[string]any{"image": env.ImageRef, "limits": map[string]any{"memory_bytes": 1 << 30}}, "golden": golden}
	if in := a.create(other); in.Warm {
		t.Errorf("a create with other limits claimed the warm episode: %+v", in)
	}
	if n := a.metric("gvx_serve_warm_claims_total"); n != 1 {
		t.Errorf("%d warm claims, want 1", n)
	}
}
