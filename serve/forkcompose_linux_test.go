package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/runtime/runtimetest"
	"z.gfire.dev/gvx/serve"
)

// composeProject is the project a client uploads: web serves a page on
// a user-defined network, app is where its tests run. Both use the hello
// image (busybox) loaded from a local archive: nothing is pulled.
const composeProject = `name: proj
services:
  web:
    image: hello:latest
    pull_policy: never
    command: ["sh", "-c", "mkdir -p /www && echo served-by-web >/www/index.html && exec busybox httpd -f -p 8080 -h /www"]
    networks: [net]
  app:
    image: hello:latest
    pull_policy: never
    command: ["sleep", "100000"]
    networks: [net]
networks:
  net: {}
`

// composeTests is the project's tests, run in app: the names web and app
// resolve through Docker's DNS (busybox nslookup: the image's busybox is
// static glibc, whose own lookups crash in a container), and GET
// http://web:8080/ at the address web resolves to answers web's page. It
// tries for up to 10 s, so httpd has started after `up --wait`.
const composeTests = `set -u
for i in $(seq 20); do
  web=$(busybox nslookup web 2>/dev/null | awk '/^Address:/ && $2 !~ /:/ {a=$2} END {print a}')
  app=$(busybox nslookup app 2>/dev/null | awk '/^Address:/ && $2 !~ /:/ {a=$2} END {print a}')
  page=""
  [ -n "$web" ] && page=$(printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 5 "$web" 8080 | tail -n 1)
  if [ -n "$app" ] && [ "$page" = served-by-web ]; then echo "PASS web=$web app=$app"; exit 0; fi
  sleep 0.5
done
echo "FAIL web=[$web] app=[$app] page=[$page]"; busybox nslookup web; exit 1
`

// TestForkCompose is issue 30's proof through rungv serve's HTTP API, as
// a client (the Python client's Episode.fork is this same POST) drives
// it: a forkable Docker episode of the sid dind image (Docker 28 with
// Compose) on an empty volume; the client uploads the image archive and
// a Compose project of two services on a user-defined network, runs
// `docker compose up -d --wait` and the project's tests (app resolves
// web and app by name and fetches web's page). A fork made impossible
// on purpose (an exec streaming while it is asked) is refused with 409
// and one line, and the parent's tests still pass. Then a fork into 4:
// in each child and in the parent, compose lists both services running,
// and the same tests pass, names resolved. It needs gVisor patches 0006,
// 0007 and 0009 (a build with cmd/gvisorpatch's env) and root (the dind
// image is built with debootstrap). Python's version of it would add
// nothing but the client's JSON: the Go test drives the same HTTP API end
// to end. 25–36 s here (the fork into 4 2.8–4.7 s) on a loaded 2-CPU machine.
func TestForkCompose(t *testing.T) {
	need(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the dind image is built as root (debootstrap)")
	}
	for _, p := range []string{"0006-netns-stacks-restore", "0007-netns-links-restore", "0009-netns-iptables-save"} {
		needPatch(t, p)
	}
	layout := dindtest.Sid.Layout(t)
	dir := shortDir(t)
	hello, gold := filepath.Join(dir, "hello.tar"), filepath.Join(dir, "docker.ext4")
	if err := dindtest.WriteHello(hello); err != nil {
		t.Fatal(err)
	}
	v, err := ext4lite.Create(gold, 4<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, a := startServer(t, serve.Config{})
	p := a.create(map[string]any{"spec": map[string]any{"image": "oci:" + layout, "entrypoint": []string{"dockerd-entrypoint.sh"},
		"env": []string{"DOCKER_TLS_CERTDIR="}, "privileged": true}, "golden": gold, "golden_target": "/var/lib/docker",
		"docker": true, "forkable": true, "ttl": 900})
	t.Logf("dockerd ready %v after create", time.Since(t0).Round(time.Millisecond))
	f, err := os.Open(hello)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a.put(p.ID, "/proj/hello.tar", f)
	a.put(p.ID, "/proj/compose.yaml", strings.NewReader(composeProject))
	a.put(p.ID, "/proj/tests.sh", strings.NewReader(composeTests))
	dockerEnv := []string{"DOCKER_HOST=tcp://127.0.0.1:2375"}
	sh := func(id, cmd string) execResult {
		t.Helper()
		return a.exec(id, agent.ExecRequest{Shell: cmd, Env: dockerEnv, Workdir: "/proj", Timeout: 120})
	}
	if r := sh(p.ID, "docker load -q -i hello.tar && docker compose up -d --wait"); r.code != 0 {
		t.Fatalf("compose up: %+v", r)
	}
	tests := func(who, id string) {
		t.Helper()
		if r := sh(id, "docker compose ps --format '{{.Service}} {{.State}}' | sort | tr '\\n' ' '"); r.stdout != "app running web running " {
			t.Errorf("%s: compose ps: %+v", who, r)
		}
		if r := sh(id, "docker compose exec -T app sh -s < tests.sh"); r.code != 0 || !strings.HasPrefix(r.stdout, "PASS ") {
			t.Errorf("%s: the project's tests: %+v", who, r)
		} else {
			t.Logf("%s: %s", who, strings.TrimSpace(r.stdout))
		}
	}
	tests("before the fork, the parent", p.ID)
	t.Logf("project up and tested %v after create", time.Since(t0).Round(time.Millisecond))

	// A fork made impossible on purpose: an exec streams while it is
	// asked. It is refused in one line, no child is left, the parent's
	// tests pass, and the episode may be forked again.
	stream, closeStream := a.execStream(p.ID, "echo started; sleep 5; echo done", "started")
	_, raw := a.fork(p.ID, 4, http.StatusConflict)
	var e map[string]string
	json.Unmarshal([]byte(raw), &e)
	if msg := e["error"]; !strings.Contains(msg, "runs on unchanged") || strings.Contains(msg, "\n") || len(msg) > 1000 {
		t.Errorf("the refused fork: %s", raw)
	}
	for stream.Scan() {
	}
	closeStream()
	if n := a.metric("gvx_serve_episodes_live"); n != 1 {
		t.Errorf("%d episodes live after the refused fork, want 1", n)
	}
	tests("after the refused fork, the parent", p.ID)

	t1 := time.Now()
	kids, _ := a.fork(p.ID, 4, http.StatusCreated)
	t.Logf("fork into %d: %v", len(kids), time.Since(t1).Round(time.Millisecond))
	if len(kids) != 4 {
		t.Fatalf("fork: %d children, want 4", len(kids))
	}
	for i, k := range kids {
		tests("child "+string(rune('0'+i)), k.ID)
	}
	tests("after the fork, the parent", p.ID)
	t.Logf("TestForkCompose took %v", time.Since(t0).Round(time.Second))
}

// put uploads r to path in episode id (PUT …/files).
func (a *api) put(id, path string, r io.Reader) {
	a.t.Helper()
	var out []byte
	if code, _ := a.do("PUT", "/v1/episodes/"+id+"/files?path="+path, r, &out); code != 200 {
		a.t.Fatalf("upload %s: %d %s", path, code, out)
	}
}

// execStream starts shell in id and returns its event stream once an
// event's output contains mark; closeStream ends it.
func (a *api) execStream(id, shell, mark string) (stream *bufio.Scanner, closeStream func()) {
	a.t.Helper()
	b, _ := json.Marshal(agent.ExecRequest{Shell: shell})
	req, _ := http.NewRequest("POST", a.base+"/v1/episodes/"+id+"/exec", bytes.NewReader(b))
	if a.tok != "" {
		req.Header.Set("Authorization", "Bearer "+a.tok)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	stream = bufio.NewScanner(resp.Body)
	for stream.Scan() {
		var ev agent.Event
		if json.Unmarshal(stream.Bytes(), &ev) == nil && strings.Contains(string(ev.Data), mark) {
			return stream, func() { resp.Body.Close() }
		}
	}
	resp.Body.Close()
	a.t.Fatalf("exec %q: its stream ended before it printed %q", shell, mark)
	return nil, nil
}

// needPatch skips t when rungv lacks gVisor patch name
// (runtimetest.NeedPatch).
func needPatch(t *testing.T, name string) {
	t.Helper()
	runtimetest.NeedPatch(t, env.Rungv, name)
}
