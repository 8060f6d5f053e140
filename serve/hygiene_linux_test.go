package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/internal/hostiletest"

	"z.gfire.dev/gvx/agent"
	"z.gfire.dev/gvx/serve"
)

// rungvPID is the rungv process of episode id (its record).
func rungvPID(t *testing.T, stateDir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "ep", id, "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		PID int `json:"rungv_pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.PID == 0 {
		t.Fatalf("record %s: %v", b, err)
	}
	return rec.PID
}

// memoryLimits are the host cgroup memory limits of pids' cgroups other
// than this process's own (v1 memory.limit_in_bytes, v2 memory.max).
func memoryLimits(pids []int) map[string]string {
	own, _ := os.ReadFile("/proc/self/cgroup")
	out := map[string]string{}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if bytes.Contains(own, []byte(l+"\n")) {
				continue
			}
			f := strings.SplitN(l, ":", 3)
			if len(f) != 3 {
				continue
			}
			var files []string
			switch {
			case f[0] == "0" && f[1] == "":
				files = []string{"/sys/fs/cgroup" + f[2] + "/memory.max", "/sys/fs/cgroup/unified" + f[2] + "/memory.max"}
			case strings.Contains(","+f[1]+",", ",memory,"):
				files = []string{"/sys/fs/cgroup/memory" + f[2] + "/memory.limit_in_bytes"}
			}
			for _, p := range files {
				if v, err := os.ReadFile(p); err == nil {
					out[p] = strings.TrimSpace(string(v))
				}
			}
		}
	}
	return out
}

// guestMemTotal is MemTotal of the episode's /proc/meminfo, in bytes.
func guestMemTotal(t *testing.T, a *api, id string) int64 {
	t.Helper()
	r := a.exec(id, agent.ExecRequest{Shell: "grep MemTotal /proc/meminfo"})
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[2] != "kB" {
		t.Fatalf("guest meminfo: %+v", r)
	}
	kb, _ := strconv.ParseInt(f[1], 10, 64)
	return kb << 10
}

// TestEpisodeEnvAndMemory: the server's environment holds its token and a
// marker of its own. Neither reaches the episode's host processes (rungv,
// its supervisor, the sandbox: /proc/PID/environ) nor the guest (env run
// in it); before, rungv and everything under it carried the server's
// whole environment. An episode whose create sets no memory limit gets
// the server's default (4 GiB: the guest's MemTotal, and the host cgroup's
// limit where the runtime made one); before it had none. One that asks
// for its own limit gets that.
func TestEpisodeEnvAndMemory(t *testing.T) {
	need(t)
	const marker = "gvx-marker-7e3f9a"
	t.Setenv("GVX_SERVE_TOKEN", "tok-"+marker)
	t.Setenv("GVX_TEST_SERVER_MARKER", marker)
	state := filepath.Join(shortDir(t), "st")
	_, a := startServer(t, serve.Config{StateDir: state})

	in := a.create(map[string]any{"spec": busybox()})
	pids := hostiletest.Descendants(rungvPID(t, state, in.ID))
	if len(pids) < 2 {
		t.Fatalf("rungv %d has no processes under it: %v", pids[0], pids)
	}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue // gone, or not ours to read
		}
		var leaked []string // names only: the rest is the host's business
		for _, kv := range strings.Split(string(b), "\x00") {
			if k, v, _ := strings.Cut(kv, "="); strings.Contains(v, marker) || k == "GVX_SERVE_TOKEN" {
				leaked = append(leaked, k)
			}
		}
		if len(leaked) > 0 {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Errorf("process %d (%s) of the episode has the server's %v", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}), leaked)
		}
	}
	r := a.exec(in.ID, agent.ExecRequest{Argv: []string{"env"}})
	if r.code != 0 || !strings.Contains(r.stdout, "PATH=/bin") {
		t.Fatalf("env in the guest: %+v", r)
	}
	if strings.Contains(r.stdout, marker) || strings.Contains(r.stdout, "GVX_SERVE_TOKEN") {
		t.Errorf("the guest sees the server's environment:\n%s", r.stdout)
	}

	const def = serve.DefaultEpisodeMemory
	if got := guestMemTotal(t, a, in.ID); got != def {
		t.Errorf("episode without limits: the guest's MemTotal is %d MiB, want the default %d MiB", got>>20, def>>20)
	}
	lims := memoryLimits(pids)
	t.Logf("host memory cgroups of the episode: %v", lims)
	for p, v := range lims {
		if v != strconv.Itoa(def) {
			t.Errorf("%s: %s, want %d", p, v, def)
		}
	}
	if os.Getuid() == 0 && len(lims) == 0 {
		t.Log("no host memory cgroup of the episode's own (no cgroup filesystem here?): the guest's MemTotal was checked")
	}

	in2 := a.create(map[string]any{"spec": map[string]any{"image": env.ImageRef, "limits": map[string]any{"memory_bytes": 1 << 30}}})
	if got := guestMemTotal(t, a, in2.ID); got != 1<<30 {
		t.Errorf("episode asking for 1 GiB: the guest's MemTotal is %d MiB", got>>20)
	}
}

// TestStreamsOutliveTimeouts: with 2 s read and write timeouts, a client
// that stops taking a 64 MiB download is cut (it gets less than the whole
// file), while an exec silent for 4 s, and an upload whose body pauses
// 1.5 s between parts (4.5 s in all), still run to their end: the
// timeouts are per stall, not per request. Before, nothing cut the
// client that stopped reading: it held its request, and the agent's, for
// as long as it liked.
func TestStreamsOutliveTimeouts(t *testing.T) {
	need(t)
	_, a := startServer(t, serve.Config{ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	in := a.create(map[string]any{"spec": busybox()})
	const size = 64 << 20
	if r := a.exec(in.ID, agent.ExecRequest{Shell: fmt.Sprintf("head -c %d /dev/zero >/tmp/big && wc -c </tmp/big", size)}); strings.TrimSpace(r.stdout) != strconv.Itoa(size) {
		t.Fatalf("make the file: %+v", r)
	}

	// A client that reads the headers, then nothing for 5 s.
	c, err := a.c.Transport.(*http.Transport).DialContext(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/episodes/%s/files?path=/tmp/big HTTP/1.1\r\nHost: gvx\r\n\r\n", in.ID)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("download: %v %v", resp, err)
	}
	time.Sleep(5 * time.Second)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, resp.Body)
	t.Logf("the stalled client got %d of %d bytes: %v", n, size, err)
	if n == size || err == nil {
		t.Errorf("a client that took nothing for 5 s still got the whole file (%d bytes, %v); WriteTimeout is 2 s", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the stalled download was neither ended nor finished: %v", err)
	}

	// A silent exec longer than both timeouts.
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "echo a; sleep 4; echo b"}); r.stdout != "a\nb\n" || r.code != 0 {
		t.Errorf("an exec silent for 4 s: %+v", r)
	}
	// An upload whose body pauses between its parts.
	pr, pw := io.Pipe()
	go func() {
		for i := range 3 {
			if i > 0 {
				time.Sleep(1500 * time.Millisecond)
			}
			pw.Write(bytes.Repeat([]byte{'x'}, 1<<20))
		}
		pw.Close()
	}()
	var out []byte
	if code, _ := a.do("PUT", "/v1/episodes/"+in.ID+"/files?path=/tmp/up", pr, &out); code != 200 {
		t.Fatalf("a slow upload: %d %s", code, out)
	}
	if r := a.exec(in.ID, agent.ExecRequest{Shell: "wc -c </tmp/up"}); strings.TrimSpace(r.stdout) != strconv.Itoa(3<<20) {
		t.Errorf("the slow upload wrote %+v", r)
	}
}
