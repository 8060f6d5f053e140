package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/serve"
)

// createAsync posts a create and returns a channel with its status and
// answer.
func (a *api) createAsync(req map[string]any) <-chan createAnswer {
	b, _ := json.Marshal(req)
	ch := make(chan createAnswer, 1)
	go func() {
		resp, err := a.c.Post(a.base+"/v1/episodes", "application/json", bytes.NewReader(b))
		if err != nil {
			ch <- createAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		ch <- createAnswer{code: resp.StatusCode, body: string(body)}
	}()
	return ch
}

type createAnswer struct {
	code int
	body string
	err  error
}

// serviceLog is GET …/service/log's body.
func (a *api) serviceLog(id string) string {
	a.t.Helper()
	var b []byte
	if code, _ := a.do("GET", "/v1/episodes/"+id+"/service/log", nil, &b); code != 200 {
		a.t.Fatalf("service log: %d %s", code, b)
	}
	return string(b)
}

// TestServiceNeverReady: a create with "docker" whose daemon never comes
// up (a service that prints a line and sleeps) is visible while it boots
// (the episode starting, its service starting, its log), and answers,
// once the ready timeout passes, with an error that says so and ends
// with the log's tail; nothing is left behind. Before, the create
// answered 201 at once and the client polled `docker info` itself.
func TestServiceNeverReady(t *testing.T) {
	need(t)
	const timeout = 8 * time.Second
	_, a := startServer(t, serve.Config{ReadyTimeout: timeout})
	svc := []string{"sh", "-c", "echo daemon-booting-7; exec sleep 1000"}
	t0 := time.Now()
	ch := a.createAsync(map[string]any{"spec": map[string]any{"image": env.ImageRef, "entrypoint": svc}, "docker": true})

	var seen serve.EpisodeInfo
	var log string
	for seen.Service == nil || seen.Service.State != serve.ServiceStarting || !strings.Contains(log, "daemon-booting-7") {
		select {
		case ans := <-ch:
			t.Fatalf("create answered before its boot was seen: %d %s %v (last seen %+v, log %q)", ans.code, ans.body, ans.err, seen, log)
		case <-time.After(50 * time.Millisecond):
		}
		var list struct{ Episodes []serve.EpisodeInfo }
		a.do("GET", "/v1/episodes", nil, &list)
		if len(list.Episodes) != 1 {
			continue
		}
		id := list.Episodes[0].ID
		seen = serve.EpisodeInfo{}
		if code, _ := a.do("GET", "/v1/episodes/"+id, nil, &seen); code != 200 {
			continue
		}
		if seen.State != serve.StateStarting {
			t.Fatalf("while Docker is awaited the episode is %q, want starting: %+v", seen.State, seen)
		}
		var b []byte
		if code, _ := a.do("GET", "/v1/episodes/"+id+"/service/log", nil, &b); code == 200 {
			log = string(b)
		}
	}
	if strings.Join(seen.Service.Argv, " ") != strings.Join(svc, " ") {
		t.Errorf("service argv %q, want %q", seen.Service.Argv, svc)
	}
	ans := <-ch
	d := time.Since(t0)
	t.Logf("create answered after %v: %d %s", d, ans.code, ans.body)
	if ans.code != http.StatusInternalServerError {
		t.Fatalf("create: %d %s, want 500", ans.code, ans.body)
	}
	var e map[string]string
	json.Unmarshal([]byte(ans.body), &e)
	for _, want := range []string{"did not answer GET /info within the ready timeout (8s", "docker.sock", `the service ["sh" "-c" "echo daemon-booting-7; exec sleep 1000"] is running`, "its log ends:", "daemon-booting-7"} {
		if !strings.Contains(e["error"], want) {
			t.Errorf("create's error lacks %q: %s", want, e["error"])
		}
	}
	if a.metric("gvx_serve_episodes_live") != 0 {
		t.Errorf("the failed episode is still live")
	}
}

// TestServiceExits: a create with "docker" whose daemon exits fails as
// soon as the agent reports it, with its status and log, not at the ready
// timeout; with "wait": "agent" the same episode is created and its
// service's end is in its description and its log.
func TestServiceExits(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{ReadyTimeout: 5 * time.Minute})
	sp := map[string]any{"image": env.ImageRef, "entrypoint": []string{"sh", "-c", "echo no-daemon-here >&2; exit 3"}}
	ans := <-a.createAsync(map[string]any{"spec": sp, "docker": true})
	if ans.code != http.StatusInternalServerError || !strings.Contains(ans.body, "exited with status 3") || !strings.Contains(ans.body, "no-daemon-here") {
		t.Fatalf("create: %d %s, want 500 saying the service exited with status 3, with its log", ans.code, ans.body)
	}

	in := a.create(map[string]any{"spec": sp, "docker": true, "wait": "agent"})
	var got serve.EpisodeInfo
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got = serve.EpisodeInfo{}
		a.do("GET", "/v1/episodes/"+in.ID, nil, &got)
		if got.Service != nil && got.Service.State == serve.ServiceExited || time.Now().After(deadline) {
			break
		}
	}
	if got.State != serve.StateRunning || got.Service == nil || got.Service.State != serve.ServiceExited || got.Service.ExitCode == nil || *got.Service.ExitCode != 3 {
		t.Fatalf("episode with wait agent: %+v, service %+v", got, got.Service)
	}
	if log := a.serviceLog(got.ID); !strings.Contains(log, "no-daemon-here") {
		t.Errorf("service log %q lacks the service's output", log)
	}
	for _, tc := range []struct{ body, msg string }{
		{`{"spec":{"image":"x"},"wait":"docker"}`, `needs "docker": true`},
		{`{"spec":{"image":"x"},"docker":true,"wait":"docker"}`, "needs a service"},
		{`{"spec":{"image":"x"},"wait":"forever"}`, `want "agent" or "docker"`},
	} {
		var e map[string]string
		if code, _ := a.do("POST", "/v1/episodes", strings.NewReader(tc.body), &e); code != 400 || !strings.Contains(e["error"], tc.msg) {
			t.Errorf("%s: %d %v, want 400 with %q", tc.body, code, e, tc.msg)
		}
	}
}

// TestServiceReady: a create with "docker" answers once something answers
// GET /info on the episode's Docker port (busybox httpd standing in for
// dockerd, started a second late), and says the service is ready.
func TestServiceReady(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	in := a.create(map[string]any{"spec": map[string]any{"image": env.ImageRef, "entrypoint": []string{"sh", "-c",
		"mkdir -p /tmp/www && echo '{}' > /tmp/www/info && sleep 1 && exec httpd -f -p 2375 -h /tmp/www"}}, "docker": true})
	if in.Service == nil || in.Service.State != serve.ServiceReady {
		t.Fatalf("create with docker: service %+v, want ready", in.Service)
	}
	// Ready means ready from the host: the socket answers now.
	c := unixClient(in.DockerSocket)
	resp, err := c.Get("http://docker/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /info after a create that waited: %d", resp.StatusCode)
	}
}

// TestServiceLogFollow: GET …/service/log?follow=1 streams the service's
// output as it comes and ends when the episode does.
func TestServiceLogFollow(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	in := a.create(map[string]any{"spec": map[string]any{"image": env.ImageRef, "entrypoint": []string{"sh", "-c",
		"i=0; while :; do echo tick-$i; i=$((i+1)); sleep 0.1; done"}}})
	if in.Service == nil || in.Service.State != serve.ServiceRunning {
		t.Errorf("service %+v, want running", in.Service)
	}
	resp, err := a.c.Get(a.base + "/v1/episodes/" + in.ID + "/service/log?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("follow: %d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "tick-30" {
	}
	if sc.Text() != "tick-30" {
		t.Fatalf("the followed log ended before tick-30: %v", sc.Err())
	}
	if code, _ := a.do("DELETE", "/v1/episodes/"+in.ID, nil, nil); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil {
		t.Errorf("the followed log did not end cleanly with its episode: %v", err)
	}
	var e map[string]string
	if code, _ := a.do("GET", "/v1/episodes/"+in.ID+"/service/log?follow=yes", nil, &e); code != 404 {
		t.Errorf("log of a deleted episode: %d %v", code, e)
	}
}
