package runtime

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Port publishes a guest TCP port on the host, as a unix socket
// (-p unix:HOSTSOCK:GUESTPORT) or a TCP port (-p [IP:]HOSTPORT:GUESTPORT,
// IP 127.0.0.1 by default). The socket's directory is bind-mounted into
// the guest, and a relay inside the guest (this binary, bind-mounted at
// /.gvx/rungv and run as the guest's init, see relayInit) listens on the
// socket there and connects each client to 127.0.0.1:GUESTPORT in the
// guest's netstack. A TCP port is a unix socket in the episode's state
// directory plus a listener the host side opens before it locks itself
// down; the supervisor accepts on it and splices each connection to that
// socket (see publishTCP). gVisor's own port forwarding is not used: it
// lost data on bulk transfers here.
type Port struct {
	HostSocket string // unix socket path; set by the runtime for a TCP port
	HostAddr   string // "IP:PORT" of a TCP port, or ""
	GuestPort  int
}

// ParsePublish parses "unix:HOSTSOCK:GUESTPORT", "HOSTPORT:GUESTPORT" and
// "IP:HOSTPORT:GUESTPORT" (IPv6 in brackets).
func ParsePublish(s string) (Port, error) {
	bad := func(why string) (Port, error) {
		return Port{}, fmt.Errorf("%w: -p %q: %s (want unix:HOSTSOCK:GUESTPORT or [IP:]HOSTPORT:GUESTPORT)", ErrBadOption, s, why)
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return bad("no guest port")
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port <= 0 || port > 65535 {
		return bad("bad guest port")
	}
	host := s[:i]
	if sock, ok := strings.CutPrefix(host, "unix:"); ok {
		if sock == "" {
			return bad("empty socket path")
		}
		return Port{HostSocket: sock, GuestPort: port}, nil
	}
	ip, hp := "127.0.0.1", host
	if j := strings.LastIndexByte(host, ':'); j >= 0 {
		ip, hp = strings.Trim(host[:j], "[]"), host[j+1:]
		if net.ParseIP(ip) == nil {
			return bad("bad host IP")
		}
	}
	hostPort, err := strconv.Atoi(hp)
	if err != nil || hostPort < 0 || hostPort > 65535 {
		return bad("bad host port")
	}
	return Port{HostAddr: net.JoinHostPort(ip, strconv.Itoa(hostPort)), GuestPort: port}, nil
}

// relayCmd is the hidden subcommand run inside the guest.
const relayCmd = "_gvx-relay"

// Guest paths of the relay's pieces.
const (
	guestRelayDir = "/.gvx"
	guestRungv    = guestRelayDir + "/rungv"
)

// relayInit is the guest's init when ports are published: it serves every
// "SOCK=PORT" before "--" (relay), runs the rest as the guest's command,
// hands it every signal, reaps orphans as init must, and exits with the
// command's status. (Starting the relay with runsc exec instead kept a
// connection to the sandbox's control server open, and runsc kill was then
// refused.)
func relayInit(args []string) int {
	sep := -1
	for i, a := range args {
		if a == "--" {
			sep = i
			break
		}
	}
	if sep < 0 || sep == len(args)-1 {
		fmt.Fprintln(os.Stderr, "rungv relay: want SOCK=PORT... -- COMMAND")
		return 127
	}
	if code := relay(args[:sep]); code != 0 {
		return code
	}
	cmd := exec.Command(args[sep+1], args[sep+2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	go func() {
		for s := range sigs {
			if s != unix.SIGCHLD && s != unix.SIGURG {
				_ = cmd.Process.Signal(s)
			}
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 127
		}
		if pid == cmd.Process.Pid {
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// relay starts serving every "SOCK=PORT" of specs in the background,
// connecting each client to 127.0.0.1:PORT.
func relay(specs []string) int {
	var lns []net.Listener
	var targets []string
	for _, s := range specs {
		sock, port, ok := strings.Cut(s, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "rungv relay: bad spec %q\n", s)
			return 2
		}
		_ = os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rungv relay:", err)
			return 1
		}
		lns = append(lns, ln)
		targets = append(targets, net.JoinHostPort("127.0.0.1", port))
	}
	for i := range lns {
		go serve(lns[i], targets[i])
	}
	return 0
}

func serve(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go pipe(c, target)
	}
}

// pipe copies both ways between c and a new connection to target, with
// half-closes, so request/response protocols (HTTP, the Docker API) see
// EOF where they expect it.
func pipe(c net.Conn, target string) {
	defer c.Close()
	var t net.Conn
	var err error
	for i := 0; i < 20; i++ { // the service may still be starting
		if t, err = net.Dial("tcp", target); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return
	}
	defer t.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(t, c)
		if tc, ok := t.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, t)
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	<-done
}
