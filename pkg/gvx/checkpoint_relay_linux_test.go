package gvx_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/spec"
)

// httpGuest serves /www/index.html ("hello") on guest port 8080 with
// busybox httpd, and says "up" once it listens.
const httpGuest = `mkdir -p /www && echo hello > /www/index.html && httpd -p 8080 -h /www && echo up
while read -r l; do eval "$l"; done`

// TestCheckpointRelayState: a checkpoint of an episode whose published
// port has carried requests stays small, and a restore of it serves them
// again. The guest's relay copied with splice once (Go's io.Copy between
// sockets), through pipes Go sizes to 1 MiB, and gVisor grows a pipe's
// buffer to what a splice asks for: each such pipe was 1 MiB more state,
// decoded a byte at a time on every restore (2 of a booted dockerd's
// 2.5 MB, and ~40 % of its restore's CPU).
func TestCheckpointRelayState(t *testing.T) {
	ctx := context.Background()
	need(t)
	poolEnv(t)
	dir, _ := poolDirs(t)
	socks, err := os.MkdirTemp("", "gvx-relay-") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(socks) })
	vol := filepath.Join(dir, "golden.ext4")
	makeGolden(t, vol)
	sock := filepath.Join(socks, "boot.sock")
	sb, pw, out := newGuest(t, ctx, vol, filepath.Join(dir, "ck"), httpGuest, []spec.Port{{HostSocket: sock, GuestPort: 8080}})
	g := startEpisode(t, ctx, sb, pw, out)
	out.waitFor(t, `(?m)^up$`)
	for range 8 {
		if got, err := get(sock); got != "hello\n" {
			t.Fatalf("GET / through the published port: %q, %v; want hello", got, err)
		}
	}
	cp, err := sb.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-g.done
	st, err := os.Stat(filepath.Join(cp.Dir, "checkpoint.img"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("saved kernel state: %d bytes", st.Size())
	if st.Size() > 1<<20 {
		t.Errorf("checkpoint.img is %d bytes after 8 requests through the relay, want < 1 MiB (a 1 MiB splice pipe in the guest's relay?)", st.Size())
	}

	rsock := filepath.Join(socks, "r.sock")
	rpr, rpw := stdinPipe(t) // the guest's shell ends at EOF
	r, err := cp.Restore(ctx, []string{filepath.Join(dir, "r.ext4")}, gvx.Config{Rungv: rungvBin, Stdin: rpr, Ports: []gvx.Port{{HostSocket: rsock}}})
	if err != nil {
		t.Fatal(err)
	}
	startEpisode(t, ctx, r, rpw, newOutput())
	// Polled, as a readiness probe does: the socket exists before the
	// restored guest runs.
	var got string
	for deadline := time.Now().Add(60 * time.Second); got != "hello\n" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err = get(rsock)
	}
	if got != "hello\n" {
		t.Fatalf("GET / of the restored episode: %q, %v; want hello", got, err)
	}
}

// get fetches / over the unix socket sock, without keep-alive (a held
// connection is a host socket gVisor cannot save).
func get(sock string) (string, error) {
	c := http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://guest/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.ReplaceAll(string(b), "\r", ""), err
}
