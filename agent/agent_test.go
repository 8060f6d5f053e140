package agent

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The agent's handler runs here on the host: what it does in the guest it
// does to the test's temp directory.

func newAgent(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer((&Agent{}).Handler())
	t.Cleanup(ts.Close)
	return ts
}

// execEvents posts req and returns the stream's events.
func execEvents(t *testing.T, ts *httptest.Server, req ExecRequest) (int, []Event) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(ts.URL+"/exec", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return resp.StatusCode, evs
}

func collect(evs []Event) (stdout, stderr string, exit *Event) {
	var o, e strings.Builder
	for i := range evs {
		switch evs[i].Type {
		case EventStdout:
			o.Write(evs[i].Data)
		case EventStderr:
			e.Write(evs[i].Data)
		case EventExit:
			exit = &evs[i]
		}
	}
	return o.String(), e.String(), exit
}

func TestExec(t *testing.T) {
	ts := newAgent(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name           string
		req            ExecRequest
		stdout, stderr string
		code           int
		timedOut       bool
	}{
		{"shell", ExecRequest{Shell: "echo out; echo err >&2; exit 3"}, "out\n", "err\n", 3, false},
		{"argv env workdir", ExecRequest{Argv: []string{"sh", "-c", "echo $X; pwd"}, Env: []string{"X=42"}, Workdir: dir}, "42\n" + dir + "\n", "", 0, false},
		{"stdin", ExecRequest{Argv: []string{"cat"}, Stdin: []byte("in\x00put")}, "in\x00put", "", 0, false},
		{"timeout kills the group", ExecRequest{Shell: "sleep 30 & sleep 30", Timeout: 0.3}, "", "", 137, true},
		{"background child keeps pipes", ExecRequest{Shell: "echo a; sleep 30 &"}, "a\n", "", 0, false},
		{"signal", ExecRequest{Shell: "kill -TERM $$"}, "", "", 143, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			code, evs := execEvents(t, ts, tc.req)
			if code != http.StatusOK {
				t.Fatalf("status %d: %+v", code, evs)
			}
			out, errs, exit := collect(evs)
			if exit == nil || exit.ExitCode == nil {
				t.Fatalf("no exit event in %+v", evs)
			}
			if out != tc.stdout || errs != tc.stderr || *exit.ExitCode != tc.code || exit.TimedOut != tc.timedOut {
				t.Fatalf("got stdout %q stderr %q exit %d timed out %v; want %q %q %d %v", out, errs, *exit.ExitCode, exit.TimedOut, tc.stdout, tc.stderr, tc.code, tc.timedOut)
			}
			if evs[len(evs)-1].Type != EventExit {
				t.Fatalf("the stream does not end with its exit: %+v", evs)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Fatalf("took %v: a background child held the stream", d)
			}
		})
	}
}

func TestExecBadRequests(t *testing.T) {
	ts := newAgent(t)
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{`, 400},
		{`{}`, 400},
		{`{"argv":["true"],"shell":"true"}`, 400},
		{`{"argv":["/no/such/binary"]}`, 400},
		{`{"stdin":"` + strings.Repeat("A", MaxExecRequest) + `"}`, 400},
	} {
		resp, err := http.Post(ts.URL+"/exec", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.code || e["error"] == "" {
			t.Errorf("%.40s: status %d %v, want %d with an error", tc.body, resp.StatusCode, e, tc.code)
		}
	}
}

func do(t *testing.T, method, u string, body io.Reader) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, u, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func TestFiles(t *testing.T) {
	ts := newAgent(t)
	dir := t.TempDir()
	data := make([]byte, 3<<20+7)
	rand.Read(data)
	p := filepath.Join(dir, "a/b/f.bin")
	q := url.Values{"path": {p}, "mode": {"0600"}}.Encode()
	if code, b, _ := do(t, "PUT", ts.URL+"/file?"+q, bytes.NewReader(data)); code != 200 {
		t.Fatalf("put: %d %s", code, b)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v %v", st.Mode(), err)
	}
	code, b, h := do(t, "GET", ts.URL+"/file?path="+url.QueryEscape(p), nil)
	if code != 200 || !bytes.Equal(b, data) || h.Get("X-Gvx-Mode") != "0600" {
		t.Fatalf("get: %d, %d bytes, mode %q", code, len(b), h.Get("X-Gvx-Mode"))
	}
	for _, tc := range []struct {
		method, query string
		code          int
	}{
		{"GET", "path=relative", 400},
		{"GET", "", 400},
		{"GET", "path=" + url.QueryEscape(filepath.Join(dir, "missing")), 404},
		{"GET", "path=" + url.QueryEscape(dir), 400},
		{"PUT", "path=" + url.QueryEscape(p) + "&mode=999", 400},
	} {
		if code, b, _ := do(t, tc.method, ts.URL+"/file?"+tc.query, strings.NewReader("x")); code != tc.code || !strings.Contains(string(b), "error") {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.query, code, b, tc.code)
		}
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	ts := newAgent(t)
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "tree/sub"), 0o750)
	os.WriteFile(filepath.Join(src, "tree/sub/f"), []byte("hello"), 0o640)
	os.WriteFile(filepath.Join(src, "tree/x"), bytes.Repeat([]byte{1}, 100000), 0o755)
	os.Symlink("sub/f", filepath.Join(src, "tree/link"))

	code, tarball, _ := do(t, "GET", ts.URL+"/archive?path="+url.QueryEscape(filepath.Join(src, "tree")), nil)
	if code != 200 {
		t.Fatalf("get archive: %d %s", code, tarball)
	}
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = true
	}
	for _, n := range []string{"tree/", "tree/sub/", "tree/sub/f", "tree/x", "tree/link"} {
		if !names[n] {
			t.Errorf("archive lacks %s: %v", n, names)
		}
	}
	code, b, _ := do(t, "PUT", ts.URL+"/archive?path="+url.QueryEscape(dst), bytes.NewReader(tarball))
	if code != 200 {
		t.Fatalf("put archive: %d %s", code, b)
	}
	var res ArchiveResult
	json.Unmarshal(b, &res)
	if res.Entries != 5 || res.Bytes != 100005 {
		t.Errorf("result %+v, want 5 entries, 100005 bytes", res)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "tree/sub/f")); string(got) != "hello" {
		t.Errorf("f: %q", got)
	}
	if st, _ := os.Stat(filepath.Join(dst, "tree/x")); st == nil || st.Mode().Perm() != 0o755 || st.Size() != 100000 {
		t.Errorf("x: %v", st)
	}
	if l, _ := os.Readlink(filepath.Join(dst, "tree/link")); l != "sub/f" {
		t.Errorf("link: %q", l)
	}
}

func TestArchiveStaysInside(t *testing.T) {
	ts := newAgent(t)
	parent := t.TempDir()
	dst := filepath.Join(parent, "dst")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	if code, b, _ := do(t, "PUT", ts.URL+"/archive?path="+url.QueryEscape(dst), &buf); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	if _, err := os.Stat(filepath.Join(dst, "escape")); err != nil {
		t.Errorf("the entry should land inside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
		t.Errorf("an entry climbed out of the target")
	}
	if code, _, _ := do(t, "PUT", ts.URL+"/archive?path="+url.QueryEscape(dst), strings.NewReader("not a tar, long enough to be read as a header block? no")); code != 400 {
		t.Errorf("garbage archive: status %d, want 400", code)
	}
}

// TestDaemonServiceTLS: a privileged episode's daemon service
// (DaemonCommand, as serve builds a `docker: true` episode's) gets the
// Sentry's dockerd flags and --tls=false when the guest's environment and
// daemon.json set no TLS up — the DOCKER_TLS_CERTDIR= recipe no longer
// waits dockerd's 15 s — and no --tls=false when DOCKER_TLS_CERTDIR is set
// (docker:dind's own /certs) or daemon.json speaks of tls; an
// unprivileged service (Command) is started as given.
func TestDaemonServiceTLS(t *testing.T) {
	svc := []string{"dockerd-entrypoint.sh"}
	cmd := DaemonCommand(2375, svc)
	_, got, err := parseArgs(cmd[2:])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "--iptables=false") {
		t.Errorf("DaemonCommand's service %q lacks the Sentry's flags", got)
	}
	for _, tc := range []struct {
		env  []string
		json string
		want bool
	}{
		{[]string{"DOCKER_TLS_CERTDIR="}, "", true},
		{nil, "", true},
		{[]string{"DOCKER_TLS_CERTDIR=/certs"}, "", false},
		{[]string{"DOCKER_TLS_CERTDIR=/certs", "DOCKER_TLS_CERTDIR="}, "", true},
		{[]string{"DOCKER_TLS_CERTDIR="}, `{"tlsverify": true}`, false},
	} {
		var dj []byte
		if tc.json != "" {
			dj = []byte(tc.json)
		}
		argv := daemonArgv(svc, tc.env, dj)
		if g := slices.Contains(argv, "--tls=false"); g != tc.want {
			t.Errorf("env %q daemon.json %q: service %q: --tls=false %v, want %v", tc.env, tc.json, argv, g, tc.want)
		}
	}
	_, plain, err := parseArgs(Command(2375, svc)[2:])
	if err != nil || !slices.Equal(plain, svc) {
		t.Errorf("Command's service: %q %v, want %q", plain, err, svc)
	}
}

// TestExecWorkdir: an exec whose workdir is missing, or is a file, is
// refused with 400 naming the directory, not with the start's own error,
// which blames the program ("fork/exec /bin/sh: no such file or
// directory"); a workdir that exists is the command's directory.
func TestExecWorkdir(t *testing.T) {
	ts := newAgent(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ workdir, want string }{
		{filepath.Join(dir, "nope"), "workdir " + filepath.Join(dir, "nope") + ": no such directory"},
		{file, "workdir " + file + ": not a directory"},
	} {
		for _, req := range []ExecRequest{{Shell: "true", Workdir: tc.workdir}, {Argv: []string{"true"}, Workdir: tc.workdir}} {
			code, b, _ := do(t, "POST", ts.URL+"/exec", strings.NewReader(mustJSON(req)))
			var e map[string]string
			_ = json.Unmarshal(b, &e)
			if code != 400 || !strings.Contains(e["error"], tc.want) || strings.Contains(e["error"], "/bin/sh") {
				t.Errorf("exec %+v: %d %s, want 400 with %q", req, code, b, tc.want)
			}
		}
	}
	code, evs := execEvents(t, ts, ExecRequest{Shell: "pwd", Workdir: dir})
	if out, _, exit := collect(evs); code != 200 || out != dir+"\n" || exit == nil || *exit.ExitCode != 0 {
		t.Errorf("exec in %s: %d %q %+v", dir, code, out, exit)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestFileModeBits: GET /file's X-Gvx-Mode has the file's setuid, setgid
// and sticky bits as well as its permissions, as chmod takes them.
func TestFileModeBits(t *testing.T) {
	ts := newAgent(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		want string
	}{
		{0o640, "0640"},
		{0o755 | os.ModeSetuid, "04755"},
		{0o750 | os.ModeSetgid, "02750"},
		{0o700 | os.ModeSticky | os.ModeSetuid, "05700"},
	} {
		p := filepath.Join(dir, tc.want)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != tc.mode {
			t.Skipf("the filesystem of %s keeps mode %v as %v", dir, tc.mode, st.Mode())
		}
		code, b, h := do(t, "GET", ts.URL+"/file?path="+url.QueryEscape(p), nil)
		if code != 200 || string(b) != "x" || h.Get("X-Gvx-Mode") != tc.want {
			t.Errorf("%v: %d %q, X-Gvx-Mode %q, want %q", tc.mode, code, b, h.Get("X-Gvx-Mode"), tc.want)
		}
	}
}

// TestPutFileModeBits: PUT /file's mode= makes a new file with exactly
// those bits, setuid, setgid and sticky included and past the umask, as
// GET /file's X-Gvx-Mode reports them; a PUT with mode=04755 made a 0755
// file (os.FileMode(04755) is not Go's setuid, and os.OpenFile dropped
// it). An existing file keeps its mode.
func TestPutFileModeBits(t *testing.T) {
	ts := newAgent(t)
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, mode := range []string{"04755", "02750", "01777", "0777", "06711", "0600"} {
		p := filepath.Join(dir, "f"+mode)
		code, b, _ := do(t, "PUT", ts.URL+"/file?path="+url.QueryEscape(p)+"&mode="+mode, strings.NewReader("data"))
		if code != 200 {
			t.Fatalf("PUT mode=%s: %d %s", mode, code, b)
		}
		_, _, h := do(t, "GET", ts.URL+"/file?path="+url.QueryEscape(p), nil)
		if got := h.Get("X-Gvx-Mode"); got != mode {
			t.Errorf("PUT mode=%s made a file of mode %s", mode, got)
		}
	}
	// A second PUT truncates and rewrites, and leaves the mode as it was.
	p := filepath.Join(dir, "f04755")
	if code, b, _ := do(t, "PUT", ts.URL+"/file?path="+url.QueryEscape(p)+"&mode=0600", strings.NewReader("new")); code != 200 {
		t.Fatalf("second PUT: %d %s", code, b)
	}
	code, b, h := do(t, "GET", ts.URL+"/file?path="+url.QueryEscape(p), nil)
	if code != 200 || string(b) != "new" || h.Get("X-Gvx-Mode") != "04755" {
		t.Errorf("after a second PUT: %d %q mode %s, want \"new\" and 04755", code, b, h.Get("X-Gvx-Mode"))
	}
}

// TestWriteModeSpecialBits: PUT /file?mode=04755 and an archive entry of
// mode 02775 keep setuid, setgid and sticky, and the umask does not narrow
// the permissions; an existing file keeps its mode. os.FileMode(0o4755)
// is 0755 to Go, so both used to drop the special bits.
func TestWriteModeSpecialBits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setuid/setgid on a file of one's own needs no root, but a test dir's group may drop setgid for a non-member: run as root")
	}
	ts := newAgent(t)
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	want := func(p string, m os.FileMode) {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != m {
			t.Errorf("%s: mode %v, want %v", p, got, m)
		}
	}
	p := filepath.Join(dir, "suid")
	if code, b, _ := do(t, "PUT", ts.URL+"/file?"+url.Values{"path": {p}, "mode": {"04755"}}.Encode(), strings.NewReader("x")); code != 200 {
		t.Fatalf("put: %d %s", code, b)
	}
	want(p, 0o755|os.ModeSetuid)
	if code, b, _ := do(t, "PUT", ts.URL+"/file?"+url.Values{"path": {p}, "mode": {"0600"}}.Encode(), strings.NewReader("y")); code != 200 {
		t.Fatalf("put again: %d %s", code, b)
	}
	want(p, 0o755|os.ModeSetuid) // existing: kept

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "shared/", Typeflag: tar.TypeDir, Mode: 0o2775})
	tw.WriteHeader(&tar.Header{Name: "shared/tool", Typeflag: tar.TypeReg, Mode: 0o6755, Size: 1})
	tw.Write([]byte("z"))
	tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	tw.Close()
	dst := filepath.Join(dir, "x")
	if code, b, _ := do(t, "PUT", ts.URL+"/archive?path="+url.QueryEscape(dst), &buf); code != 200 {
		t.Fatalf("put archive: %d %s", code, b)
	}
	want(filepath.Join(dst, "shared"), 0o775|os.ModeSetgid)
	want(filepath.Join(dst, "shared/tool"), 0o755|os.ModeSetuid|os.ModeSetgid)
	want(filepath.Join(dst, "tmp"), 0o777|os.ModeSticky)
}
