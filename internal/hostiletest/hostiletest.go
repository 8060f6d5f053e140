// Package hostiletest holds peers for tests that play the guest against
// the host: an HTTP server on a unix socket that answers every request
// with bytes the test chose (a status line, headers and a body that no
// well-behaved server would send), so a host-side client meets a guest's
// agent or Docker daemon as an attacker writes it. For tests only.
package hostiletest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// RawHTTP listens on a new unix socket in a new temporary directory and
// returns its path (removed at the end of the test). Each connection's request head is read, then answer
// written as it is; with hold the connection then stays open, silent,
// until the test ends, else it is closed.
func RawHTTP(t testing.TB, answer string, hold bool) string {
	t.Helper()
	// Not t.TempDir: a subtest's name can make it too long for a socket.
	dir, err := os.MkdirTemp("", "hostile-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "raw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close(); os.RemoveAll(dir) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if _, err := io.WriteString(c, answer); err != nil || !hold {
					return
				}
				<-stop
			}()
		}
	}()
	return sock
}
