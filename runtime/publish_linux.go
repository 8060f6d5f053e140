package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// TCP publishing (-p [IP:]HOSTPORT:GUESTPORT). The host side opens each
// listener before it locks itself down (afterwards it may not create or
// connect sockets) and hands it to the supervisor, which is not locked
// down and shares the host's mount namespace: it accepts there and
// splices every connection to the port's unix socket in the state
// directory, where the guest's relay listens (see Port).

// publishEnv tells the supervisor its listeners, as a JSON list of
// publishedFD.
const publishEnv = "GVX_PUBLISH_TCP"

// publishedFD is one listener the supervisor inherits.
type publishedFD struct {
	FD     int    `json:"fd"`
	Socket string `json:"socket"` // the guest relay's socket
}

// tcpPort is one published TCP port of an episode.
type tcpPort struct {
	addr, sock string
}

// listenTCP opens the listeners of ports, or closes what it opened and
// fails.
func listenTCP(ports []tcpPort) ([]*os.File, error) {
	var files []*os.File
	for _, p := range ports {
		l, err := net.Listen("tcp", p.addr)
		if err == nil {
			var f *os.File
			f, err = l.(*net.TCPListener).File()
			l.Close()
			if err == nil {
				files = append(files, f)
				continue
			}
		}
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("-p %s: %w", p.addr, err)
	}
	return files, nil
}

// publishTCP serves the listeners named by publishEnv, until the
// supervisor exits.
func publishTCP() {
	spec := os.Getenv(publishEnv)
	if spec == "" {
		return
	}
	os.Unsetenv(publishEnv)
	var fds []publishedFD
	if err := json.Unmarshal([]byte(spec), &fds); err != nil {
		fmt.Fprintf(os.Stderr, "rungv: -p: %v\n", err)
		return
	}
	for _, p := range fds {
		l, err := net.FileListener(os.NewFile(uintptr(p.FD), "publish"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "rungv: -p: %v\n", err)
			continue
		}
		go acceptTCP(l, p.Socket)
	}
}

func acceptTCP(l net.Listener, sock string) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go spliceToSocket(c, sock)
	}
}

// spliceToSocket connects c to the guest relay's socket and copies both
// ways, passing each side's end of stream on as a half-close. The relay
// may not be listening yet at the episode's start: the dial is retried
// for a few seconds before the client is turned away.
func spliceToSocket(c net.Conn, sock string) {
	defer c.Close()
	var u net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if u, err = net.Dial("unix", sock); err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return
		}
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go half(u, c)
	go half(c, u)
	<-done
	<-done
}
