package episodenet

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

// The relay is rungv itself, copied into a read-only EROFS image of its
// own mounted at GuestRelayDir (relayimage.go), and run as the guest's
// init when ports are published (RelayInit). The host side hands it every
// client as a connected socket over a descriptor donated to the sandbox
// (publish_linux.go); it connects each one to 127.0.0.1:PORT in the
// guest's netstack. It runs in the guest and is the guest's to break.

// RelayCmd is the hidden subcommand run inside the guest (RelayInit).
const RelayCmd = "_gvx-relay"

// Guest paths of the relay's pieces: its image (RelayImage) is mounted
// at GuestRelayDir, and GuestRungv is the binary in it.
const (
	GuestRelayDir = "/.gvx"
	GuestRungv    = GuestRelayDir + "/rungv"
)

// RelayInit is the guest's init when ports are published: it serves every
// "FD=PORT" before "--" (relay), runs the rest as the guest's command,
// hands it every signal, reaps orphans as init must, and exits with the
// command's status. (Starting the relay with runsc exec instead kept a
// connection to the sandbox's control server open, and runsc kill was then
// refused.)
func RelayInit(args []string) int {
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

// relay starts serving every "FD=PORT" of specs in the background: FD is
// a descriptor the host side donated (a SOCK_SEQPACKET socket), over which
// it sends one connected stream socket per client; each is connected to
// 127.0.0.1:PORT. The descriptors are closed on exec: the guest's command
// does not inherit them.
func relay(specs []string) int {
	for _, s := range specs {
		fdText, port, ok := strings.Cut(s, "=")
		fd, err := strconv.Atoi(fdText)
		if !ok || err != nil || fd < 3 {
			fmt.Fprintf(os.Stderr, "rungv relay: bad spec %q\n", s)
			return 2
		}
		unix.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "publish")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "rungv relay:", err)
			return 1
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			fmt.Fprintf(os.Stderr, "rungv relay: descriptor %d is not a unix socket\n", fd)
			return 1
		}
		go serve(uc, net.JoinHostPort("127.0.0.1", port))
	}
	return 0
}

// serve receives client connections over ctl until the host side closes it.
func serve(ctl *net.UnixConn, target string) {
	defer ctl.Close()
	b := make([]byte, 64)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		n, oobn, _, _, err := ctl.ReadMsgUnix(b, oob)
		if err != nil {
			return
		}
		if oobn == 0 {
			// A control word from the host side (relaylinks_linux.go).
			if ans := relayControl(string(b[:n])); ans != "" {
				_, _, _ = ctl.WriteMsgUnix([]byte(ans), nil, nil)
			}
			continue
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				f := os.NewFile(uintptr(fd), "client")
				c, err := net.FileConn(f)
				f.Close()
				if err != nil {
					continue
				}
				go pipe(c, target)
			}
		}
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
		copyPlain(t, c)
		if tc, ok := t.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	copyPlain(c, t)
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	}
	<-done
}

// copyPlain copies src to dst through a buffer of its own, never by
// splice: Go splices between sockets through a pipe it sizes to 1 MiB
// and keeps in a pool, and gVisor grows a pipe's buffer to what each
// splice asks for and never shrinks it. Two such pipes were 2 MiB of a
// booted dockerd's 2.5 MB of saved kernel state, decoded a byte at a
// time on every restore (docs/runtime.md, "Checkpoint, restore, fork").
func copyPlain(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}
