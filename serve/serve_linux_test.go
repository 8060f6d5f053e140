package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/runtime/runtimetest"
	"z.gfire.dev/gvx/serve"
	"z.gfire.dev/gvx/sink"
)

// The suite builds rungv (with its serve verb and agent) and a busybox
// image once, and makes a golden volume holding /golden.txt.
var (
	env      *runtimetest.Env
	golden   string
	setupErr error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		env, err = runtimetest.NewEnv("gvx-serve-test-", v1.Config{Env: []string{"PATH=/bin"}})
		if env.Dir != "" {
			defer os.RemoveAll(env.Dir)
		}
		setupErr = err
		if err == nil {
			golden = filepath.Join(env.Dir, "golden.ext4")
			setupErr = makeGolden(golden)
		}
		return m.Run()
	}())
}

func makeGolden(p string) error {
	v, err := ext4lite.Create(p, 64<<20, nil)
	if err != nil {
		return err
	}
	if err := v.WriteFile(&sink.Header{Path: "golden.txt", Mode: sink.TypeReg | 0o644, Size: 3}, strings.NewReader("gv\n")); err != nil {
		return err
	}
	return v.Close()
}

func need(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	if os.Getuid() != 0 {
		runtimetest.NeedUserNamespace(t, env.Rungv, "")
	}
}

// shortDir is a temp dir with a path short enough for unix sockets
// (t.TempDir's can be too long).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gvxs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// api is a client of one server's unix socket.
type api struct {
	t    *testing.T
	c    *http.Client
	base string
	tok  string
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// startServer runs a Server in-process on a unix socket.
func startServer(t *testing.T, cfg serve.Config) (*serve.Server, *api) {
	t.Helper()
	dir := shortDir(t)
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "st")
	}
	cfg.Rungv, cfg.CloneMode = env.Rungv, reflink.Auto
	if logf := cfg.Logf; logf != nil {
		cfg.Logf = func(f string, args ...any) { t.Logf(f, args...); logf(f, args...) }
	} else {
		cfg.Logf = t.Logf
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := serve.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeHTTP(ctx, ln, "") }()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if ents, _ := os.ReadDir(filepath.Join(cfg.StateDir, "ep")); len(ents) != 0 {
			t.Errorf("Close left episode directories: %v", ents)
		}
	})
	return srv, &api{t: t, c: unixClient(sock), base: "http://gvx"}
}

func (a *api) do(method, path string, body io.Reader, out any) (int, http.Header) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.tok != "" {
		req.Header.Set("Authorization", "Bearer "+a.tok)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = b
	default:
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func (a *api) create(req map[string]any) serve.EpisodeInfo {
	a.t.Helper()
	b, _ := json.Marshal(req)
	var raw json.RawMessage
	code, _ := a.do("POST", "/v1/episodes", bytes.NewReader(b), &raw)
	if code != http.StatusCreated {
		a.t.Fatalf("create: %d %s", code, raw)
	}
	var in serve.EpisodeInfo
	json.Unmarshal(raw, &in)
	return in
}

type execResult struct {
	stdout, stderr string
	code           int
	timedOut       bool
}

func (a *api) exec(id string, req agent.ExecRequest) execResult {
	a.t.Helper()
	b, _ := json.Marshal(req)
	var body []byte
	code, _ := a.do("POST", "/v1/episodes/"+id+"/exec", bytes.NewReader(b), &body)
	if code != 200 {
		a.t.Fatalf("exec: %d %s", code, body)
	}
	var r execResult
	r.code = -1
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e agent.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			a.t.Fatal(err)
		}
		switch e.Type {
		case agent.EventStdout:
			r.stdout += string(e.Data)
		case agent.EventStderr:
			r.stderr += string(e.Data)
		case agent.EventExit:
			r.code, r.timedOut = *e.ExitCode, e.TimedOut
		case agent.EventError:
			a.t.Fatalf("exec error event: %s", e.Error)
		}
	}
	return r
}

func busybox() map[string]any { return map[string]any{"image": env.ImageRef} }

// TestAPI drives one episode through every verb of the API.
func TestAPI(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	in := a.create(map[string]any{"spec": busybox(), "golden": golden, "golden_target": "/data"})
	if in.State != serve.StateRunning || in.Volume == "" || in.CloneMethod == "" || in.ReadySeconds <= 0 {
		t.Fatalf("create: %+v", in)
	}
	id := in.ID
	if r := a.exec(id, agent.ExecRequest{Shell: "cat /data/golden.txt; echo err >&2; exit 3"}); r.stdout != "gv\n" || r.stderr != "err\n" || r.code != 3 {
		t.Errorf("shell exec: %+v", r)
	}
	if r := a.exec(id, agent.ExecRequest{Argv: []string{"sh", "-c", "cat; echo $K; pwd"}, Env: []string{"K=v"}, Workdir: "/tmp", Stdin: []byte("in\n")}); r.stdout != "in\nv\n/tmp\n" || r.code != 0 {
		t.Errorf("argv exec: %+v", r)
	}
	if r := a.exec(id, agent.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: 0.5}); !r.timedOut || r.code != 137 {
		t.Errorf("timeout exec: %+v", r)
	}

	// Files round-trip byte-identical, through the clone.
	data := make([]byte, 5<<20+3)
	rand.Read(data)
	var out []byte
	if code, _ := a.do("PUT", "/v1/episodes/"+id+"/files?path=/data/dir/f.bin&mode=0640", bytes.NewReader(data), &out); code != 200 {
		t.Fatalf("write file: %d %s", code, out)
	}
	code, h := a.do("GET", "/v1/episodes/"+id+"/files?path=/data/dir/f.bin", nil, &out)
	if code != 200 || !bytes.Equal(out, data) || h.Get("X-Gvx-Mode") != "0640" {
		t.Fatalf("read file: %d, %d bytes (want %d), mode %s", code, len(out), len(data), h.Get("X-Gvx-Mode"))
	}
	var tarball []byte
	if code, _ := a.do("GET", "/v1/episodes/"+id+"/archive?path=/data/dir", nil, &tarball); code != 200 {
		t.Fatalf("download: %d %s", code, tarball)
	}
	if code, _ := a.do("PUT", "/v1/episodes/"+id+"/archive?path=/tmp/up", bytes.NewReader(tarball), &out); code != 200 {
		t.Fatalf("upload: %d %s", code, out)
	}
	if r := a.exec(id, agent.ExecRequest{Shell: "cmp /tmp/up/dir/f.bin /data/dir/f.bin && echo same"}); r.stdout != "same\n" {
		t.Errorf("archive round trip: %+v", r)
	}
	if code, _ := a.do("GET", "/v1/episodes/"+id+"/files?path=/nope", nil, &out); code != 404 {
		t.Errorf("missing file: %d %s", code, out)
	}

	var list struct{ Episodes []serve.EpisodeInfo }
	a.do("GET", "/v1/episodes", nil, &list)
	if len(list.Episodes) != 1 || list.Episodes[0].ID != id {
		t.Errorf("list: %+v", list)
	}
	var h2 serve.Health
	if a.do("GET", "/v1/health", nil, &h2); !h2.OK || h2.Live != 1 {
		t.Errorf("health: %+v", h2)
	}
	var metrics []byte
	a.do("GET", "/metrics", nil, &metrics)
	for _, want := range []string{"gvx_serve_episodes_live 1\n", "gvx_serve_episodes_created_total 1\n", "gvx_serve_execs_total 4\n", "gvx_serve_ready_seconds_count 1\n", `gvx_serve_create_seconds_bucket{le="+Inf"} 1`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}

	if code, _ := a.do("DELETE", "/v1/episodes/"+id, nil, nil); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if _, err := os.Stat(in.Volume); !os.IsNotExist(err) {
		t.Errorf("the clone outlived its episode: %v", err)
	}
	var e map[string]string
	if code, _ := a.do("POST", "/v1/episodes/"+id+"/exec", strings.NewReader(`{"shell":"true"}`), &e); code != 404 || !strings.Contains(e["error"], "torn down (close)") {
		t.Errorf("exec after delete: %d %v", code, e)
	}
}

func TestBadRequests(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{`, 400, "bad request"},
		{`{}`, 400, "no spec"},
		{`{"spec":{"image":""}}`, 400, "image"},
		{`{"spec":{"image":"x"},"golden":"rel.ext4"}`, 400, "absolute"},
		{`{"spec":{"image":"x"},"golden":"/no/such.ext4"}`, 400, "no such file"},
		{`{"spec":{"image":"x"},"bogus":1}`, 400, "bogus"},
		{`{"spec":{"image":"x"},"golden_durability":"episode"}`, 400, "set golden"},
		{`{"spec":{"image":"x"},"golden":"` + golden + `","golden_durability":"none"}`, 400, "want episode (the default) or full"},
		{`{"spec":{"image":"x"}} {"spec":{"image":"y"}}`, 400, "more than one JSON value"},
		{`{"spec":{"image":"x"},"golden":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "too large"},
		{`{"spec":{"image":"oci:/no/such/layout"}}`, 404, `image "oci:/no/such/layout" not found`},
		{`{"spec":{"image":"oci:/no/such/layout"}}`, 404, "gvx-vol image ls"},
		{`{"spec":{"image":"docker-archive:/no/such.tar"}}`, 404, "/no/such.tar"},
	} {
		var e map[string]string
		code, _ := a.do("POST", "/v1/episodes", strings.NewReader(tc.body), &e)
		if code != tc.code || !strings.Contains(e["error"], tc.msg) {
			t.Errorf("%s: %d %q, want %d with %q", tc.body, code, e["error"], tc.code, tc.msg)
		}
	}
	var e map[string]string
	if code, _ := a.do("GET", "/v1/episodes/0000/files?path=/x", nil, &e); code != 404 {
		t.Errorf("unknown episode: %d %v", code, e)
	}
}

// TestCap: past MaxEpisodes a create is refused with 429 and Retry-After;
// closing one makes room.
func TestCap(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{MaxEpisodes: 1, RetryAfter: 3 * time.Second})
	in := a.create(map[string]any{"spec": busybox()})
	var e map[string]string
	b, _ := json.Marshal(map[string]any{"spec": busybox()})
	code, h := a.do("POST", "/v1/episodes", bytes.NewReader(b), &e)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "3" || !strings.Contains(e["error"], "cap") {
		t.Fatalf("over the cap: %d Retry-After %q %v", code, h.Get("Retry-After"), e)
	}
	a.do("DELETE", "/v1/episodes/"+in.ID, nil, nil)
	in = a.create(map[string]any{"spec": busybox()})
	var metrics []byte
	a.do("GET", "/metrics", nil, &metrics)
	if !bytes.Contains(metrics, []byte("gvx_serve_create_rejected_total 1\n")) {
		t.Errorf("metrics:\n%s", metrics)
	}
}

// TestTTLAndLease: an episode goes when its TTL passes, and when its lease
// runs out with no request for it; renewing keeps it.
func TestTTLAndLease(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	ttl := a.create(map[string]any{"spec": busybox(), "ttl": 1, "lease": -1})
	lease := a.create(map[string]any{"spec": busybox(), "lease": 1})
	kept := a.create(map[string]any{"spec": busybox(), "lease": 1})
	// A request in flight holds the lease: an exec longer than it.
	if r := a.exec(kept.ID, agent.ExecRequest{Argv: []string{"sleep", "1.5"}}); r.code != 0 {
		t.Fatalf("long exec: %+v", r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var e map[string]any
		if code, _ := a.do("POST", "/v1/episodes/"+kept.ID+"/renew", nil, &e); code != 200 {
			t.Fatalf("renewed episode went: %d %v", code, e)
		}
		c1, _ := a.do("GET", "/v1/episodes/"+ttl.ID, nil, &e)
		c2, _ := a.do("GET", "/v1/episodes/"+lease.ID, nil, &e)
		if c1 == 404 && c2 == 404 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var metrics []byte
	a.do("GET", "/metrics", nil, &metrics)
	for _, want := range []string{`gvx_serve_teardowns_total{reason="ttl"} 1`, `gvx_serve_teardowns_total{reason="lease"} 1`, "gvx_serve_episodes_live 1\n"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
	var e map[string]string
	if code, _ := a.do("GET", "/v1/episodes/"+lease.ID, nil, &e); code != 404 || !strings.Contains(e["error"], "lease") {
		t.Errorf("leased episode: %d %v", code, e)
	}
}

// serveProcess starts `rungv serve ARGS` (setup adjusts the command) and
// waits for its hello line; the process is killed at cleanup.
func serveProcess(t *testing.T, setup func(*exec.Cmd), args ...string) (*exec.Cmd, *api, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(env.Rungv, append([]string{"serve"}, args...)...)
	if setup != nil {
		setup(cmd)
	}
	stdout, _ := cmd.StdoutPipe()
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("rungv serve: %v %s", err, stderr.String())
	}
	var hello struct{ Socket string }
	if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Socket == "" {
		t.Fatalf("rungv serve's hello %q: %v", line, err)
	}
	return cmd, &api{t: t, c: unixClient(hello.Socket), base: "http://gvx"}, stderr
}

// TestReapAfterSIGKILL: a `rungv serve` SIGKILLed with a live episode
// leaves nothing running (its rungv dies with it), and the next server on
// the state dir removes the episode's directory (clone, sockets, record)
// before serving, and kills a process a record still names.
func TestReapAfterSIGKILL(t *testing.T) {
	need(t)
	dir := shortDir(t)
	state, sock := filepath.Join(dir, "st"), filepath.Join(dir, "api.sock")
	cmd, a, _ := serveProcess(t, nil, "--state-dir", state, "--socket", sock, "--clone", "auto")
	in := a.create(map[string]any{"spec": busybox(), "golden": golden})
	epDir := filepath.Dir(in.Volume)
	var rec struct {
		RungvPID int    `json:"rungv_pid"`
		RungvExe string `json:"rungv_exe"`
		RungvIno uint64 `json:"rungv_ino"`
	}
	b, _ := os.ReadFile(filepath.Join(epDir, "record.json"))
	if json.Unmarshal(b, &rec); rec.RungvPID == 0 || rec.RungvIno == 0 || filepath.Base(rec.RungvExe) != "rungv" {
		t.Fatalf("record: %s", b)
	}
	// A second server on a live one's state dir is refused.
	if _, err := serve.New(serve.Config{StateDir: state, Rungv: env.Rungv}); err == nil || !strings.Contains(err.Error(), "another live rungv serve") {
		t.Fatalf("second server: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !alive(rec.RungvPID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rungv %d outlived its SIGKILLed server", rec.RungvPID)
		}
	}
	if _, err := os.Stat(in.Volume); err != nil {
		t.Fatalf("the clone should still be there for the reaper: %v", err)
	}
	// A record naming a live rungv process (as if Pdeathsig had not
	// fired): a lone rungv serve, which runs until it is killed.
	lone := exec.Command(env.Rungv, "serve", "-q", "--state-dir", filepath.Join(dir, "lone"))
	lone.Start()
	defer lone.Process.Kill()
	go lone.Wait()
	fake := filepath.Join(state, "ep", "00000000deadbeef")
	os.MkdirAll(fake, 0o700)
	os.WriteFile(filepath.Join(fake, "record.json"), []byte(fmt.Sprintf(`{"id":"00000000deadbeef","rungv_pid":%d,"rungv_start":%d}`, lone.Process.Pid, startTime(t, lone.Process.Pid))), 0o600)
	os.WriteFile(filepath.Join(fake, "volume.ext4"), []byte("x"), 0o600)

	srv, a2 := startServer(t, serve.Config{StateDir: state})
	_ = srv
	if _, err := os.Stat(epDir); !os.IsNotExist(err) {
		t.Errorf("the dead server's episode dir survived: %v", err)
	}
	if _, err := os.Stat(fake); !os.IsNotExist(err) {
		t.Errorf("the fake episode dir survived: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(lone.Process.Pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process a record named was not killed")
		}
	}
	var metrics []byte
	a2.do("GET", "/metrics", nil, &metrics)
	if !bytes.Contains(metrics, []byte("gvx_serve_reaped_at_start_total 2\n")) {
		t.Errorf("metrics:\n%s", metrics)
	}
	// And it serves.
	in2 := a2.create(map[string]any{"spec": busybox()})
	if r := a2.exec(in2.ID, agent.ExecRequest{Argv: []string{"echo", "ok"}}); r.stdout != "ok\n" {
		t.Errorf("exec: %+v", r)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func startTime(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// TestTokenTCP: a TCP listener needs a token, and every request must carry
// it; the unix socket is mode 0600.
func TestTokenTCP(t *testing.T) {
	dir := shortDir(t)
	srv, err := serve.New(serve.Config{StateDir: filepath.Join(dir, "st"), Rungv: "/bin/true", CloneMode: reflink.Auto})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := serve.ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ServeHTTP(context.Background(), ln, ""); !errors.Is(err, serve.ErrNoToken) {
		t.Fatalf("TCP without a token: %v", err)
	}
	ln, _ = serve.ListenTCP("127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.ServeHTTP(ctx, ln, "s3cret") }()
	defer func() { cancel(); <-done }()
	base := "http://" + ln.Addr().String()
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer wrong", 401}, {"s3cret", 401}, {"Bearer s3cret", 200}} {
		for _, p := range []string{"/v1/health", "/v1/episodes", "/metrics"} {
			req, _ := http.NewRequest("GET", base+p, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("%s with %q: %d, want %d", p, tc.auth, resp.StatusCode, tc.code)
			}
		}
	}
	sock := filepath.Join(dir, "api.sock")
	uln, err := serve.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", st.Mode(), err)
	}
	if _, err := serve.ListenUnix(sock); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second listener on a live socket: %v", err)
	}
}

// TestServeAsNobody: the server is unprivileged. As root, `rungv serve`
// runs as nobody (rootless sandboxes in user namespaces) and serves an
// episode from a golden clone; SIGTERM tears it down and leaves the state
// dir empty.
func TestServeAsNobody(t *testing.T) {
	need(t)
	if os.Getuid() != 0 {
		t.Skip("not root: every test of this package already runs unprivileged")
	}
	if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-Urn", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot run rootless as nobody here (setpriv, user namespaces): %v %s", err, out)
	}
	work, err := os.MkdirTemp(env.Dir, "nobody-") // readable by all, as the image is
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	state, tmp := filepath.Join(work, "st"), filepath.Join(work, "tmp")
	for _, d := range []string{state, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(work, 0o755)
	cmd, a, stderr := serveProcess(t, func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"), "XDG_RUNTIME_DIR=")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}, "--state-dir", state, "--clone", "auto")
	sock := filepath.Join(state, "serve.sock")
	if st, err := os.Stat(sock); err != nil || st.Sys().(*syscall.Stat_t).Uid != 65534 || st.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v %v", sock, st, err)
	}
	in := a.create(map[string]any{"spec": busybox(), "golden": golden})
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "cat /var/lib/docker/golden.txt; id -u"}); r.stdout != "gv\n0\n" {
		t.Errorf("exec as nobody's episode: %+v\n%s", r, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "ep")); len(ents) != 0 {
		t.Errorf("SIGTERM left episode directories: %v", ents)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the API socket outlived the server: %v", err)
	}
}

// TestGoldenDurabilityEpisode: a create with golden_durability "episode"
// boots with the clone mounted so (the spec passes validation, the server
// opens it with ext4lite's NoSync) and the guest writes and fsyncs on it.
func TestGoldenDurabilityEpisode(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{})
	in := a.create(map[string]any{"spec": busybox(), "golden": golden, "golden_target": "/data", "golden_durability": "episode"})
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "echo new > /data/new && dd if=/data/new of=/data/synced conv=fsync 2>/dev/null && cat /data/golden.txt /data/synced"}); r.stdout != "gv\nnew\n" || r.code != 0 {
		t.Fatalf("exec on the episode-durability clone: %+v", r)
	}
	a.do("DELETE", "/v1/episodes/"+in.ID, nil, nil)
}
