package main

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// uploadMD5 sends 4 MiB of random bytes on conn, half-closes it, waits
// for the far end to close, and checks the md5 the guest prints next.
func uploadMD5(t *testing.T, conn net.Conn, line func() string) {
	t.Helper()
	data := make([]byte, 4<<20)
	rand.Read(data)
	if _, err := conn.Write(data); err != nil {
		t.Fatal(err)
	}
	conn.(interface{ CloseWrite() error }).CloseWrite()
	io.Copy(io.Discard, conn)
	conn.Close()
	sum := md5.Sum(data)
	if got := line(); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload: guest md5 %s, sent %x", got, sum)
	}
}

// TestPublishUnixSocket publishes two guest TCP ports as host unix sockets
// (-p unix:HOSTSOCK:PORT) and moves 64 MiB down 20 times in a row (HTTP
// from busybox httpd) and 4 MiB up (raw, to busybox nc) through them,
// checking every byte: gVisor's own port forwarding truncated such
// transfers on this machine.
func TestPublishUnixSocket(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		socks := privateTmp(t, u)
		web, up := filepath.Join(socks, "web.sock"), filepath.Join(socks, "up.sock")
		script := `set -e
mkdir -p /www && dd if=/dev/urandom of=/www/f bs=1M count=64 2>/dev/null
md5sum /www/f | cut -c1-32
httpd -p 8080 -h /www
echo ready
nc -l -p 9000 | md5sum | cut -c1-32`
		c := command(t, u, tmp, "run", "-p", "unix:"+web+":8080", "-p", "unix:"+up+":9000", imageRef, "sh", "-c", script)
		line, stderr := startLines(t, c)
		want := line()
		if line() != "ready" {
			t.Fatal("guest not ready")
		}
		dial := func(sock string) (net.Conn, error) {
			var err error
			for i := 0; i < 100; i++ {
				var c net.Conn
				if c, err = net.Dial("unix", sock); err == nil {
					return c, nil
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil, err
		}
		hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(web) }}}
		for i := 0; i < 20; i++ {
			resp, err := hc.Get("http://guest/f")
			if err != nil {
				t.Fatal(err)
			}
			h := md5.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || n != 64<<20 || hex.EncodeToString(h.Sum(nil)) != want {
				t.Fatalf("download %d: %d bytes, md5 %x, err %v; want 64 MiB with md5 %s", i, n, h.Sum(nil), err, want)
			}
		}

		conn, err := dial(up)
		if err != nil {
			t.Fatal(err)
		}
		uploadMD5(t, conn, line)
		if err := c.Wait(); err != nil {
			t.Fatalf("rungv: %v (stderr %q)", err, stderr.String())
		}
		checkClean(t, tmp)
	})
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPublishTCP publishes a guest port on the host's loopback
// (-p HOSTPORT:GUESTPORT): 64 MiB downloaded 5 times from busybox httpd
// arrive byte-identical, and 4 MiB uploaded to busybox nc arrive too. A
// host port already in use is a clear error before anything starts.
func TestPublishTCP(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		web, up := freePort(t), freePort(t)
		script := `set -e
mkdir -p /www && dd if=/dev/urandom of=/www/f bs=1M count=64 2>/dev/null
md5sum /www/f | cut -c1-32
httpd -p 8080 -h /www
echo ready
nc -l -p 9000 | md5sum | cut -c1-32`
		c := command(t, u, tmp, "run", "--network", "none", "-p", fmt.Sprintf("%d:8080", web), "-p", fmt.Sprintf("127.0.0.1:%d:9000", up), imageRef, "sh", "-c", script)
		line, stderr := startLines(t, c)
		want := line()
		if line() != "ready" {
			t.Fatal("guest not ready")
		}
		hc := &http.Client{Timeout: 2 * time.Minute}
		for i := 0; i < 5; i++ {
			resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/f", web))
			if err != nil {
				t.Fatal(err)
			}
			h := md5.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || n != 64<<20 || hex.EncodeToString(h.Sum(nil)) != want {
				t.Fatalf("download %d: %d bytes, md5 %x, err %v; want 64 MiB with md5 %s", i, n, h.Sum(nil), err, want)
			}
		}
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", up))
		if err != nil {
			t.Fatal(err)
		}
		uploadMD5(t, conn, line)
		if err := c.Wait(); err != nil {
			t.Fatalf("rungv: %v (stderr %q)", err, stderr.String())
		}
		checkClean(t, tmp)

		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		r := runRungv(t, u, tmp, "", "run", "-p", fmt.Sprintf("%d:80", busy.Addr().(*net.TCPAddr).Port), imageRef, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "address already in use") {
			t.Fatalf("busy port: exit %d stderr %q", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
