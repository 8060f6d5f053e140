package main

import (
	"bytes"
	"crypto/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// hostHTTP serves body at /blob on 127.0.0.1 and returns the port.
func hostHTTP(t *testing.T, body []byte) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/blob" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNATHTTP fetches a multi-MiB body from a host server on 127.0.0.1
// through the gateway address; it must arrive byte for byte.
func TestNATHTTP(t *testing.T) {
	body := randomBytes(t, 6<<20+12345)
	port := hostHTTP(t, body)
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		url := "http://10.0.2.2:" + strconv.Itoa(port) + "/blob"
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", imageRef, "wget", "-qO-", url)
		if r.code != 0 || !bytes.Equal([]byte(r.stdout), body) {
			t.Fatalf("exit %d, %d bytes (want %d, equal %v); stderr:\n%s", r.code, len(r.stdout), len(body), r.stdout == string(body), natTail(r.stderr))
		}
		checkClean(t, tmp)
	})
}

// natTail is the end of a long output.
func natTail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return strings.TrimSpace(s)
}
