package episodenet

import (
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPublishCopy: what a published TCP port's host side costs per
// byte, a client's TCP connection copied to the guest's unix pair, by
// splice(2) (io.Copy, Go's 1 MiB pipes) and through copyPlain's buffer
// (what splice does now). bench/README.md: run it under the shared lock.
func BenchmarkPublishCopy(b *testing.B) {
	for _, c := range []struct {
		name string
		copy func(dst io.Writer, src io.Reader)
	}{
		{"splice", func(dst io.Writer, src io.Reader) { _, _ = io.Copy(dst, src) }},
		{"plain", copyPlain},
	} {
		b.Run(c.name, func(b *testing.B) {
			const chunk = 4 << 20
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer server.Close()
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			host, guest := unixConn(b, fds[0]), unixConn(b, fds[1])
			defer host.Close()
			defer guest.Close()
			go func() {
				c.copy(host, server)
				host.(*net.UnixConn).CloseWrite()
			}()
			done := make(chan struct{})
			go func() { // the guest reads all
				_, _ = io.Copy(io.Discard, guest)
				close(done)
			}()
			buf := make([]byte, chunk)
			b.SetBytes(chunk)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			client.(*net.TCPConn).CloseWrite()
			<-done
		})
	}
}

func unixConn(tb testing.TB, fd int) net.Conn {
	f := os.NewFile(uintptr(fd), "pair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
