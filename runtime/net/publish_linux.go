package episodenet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/internal/privdir"
	"z.gfire.dev/gvx/spec"
)

// Publishing (spec.Port: -p unix:HOSTSOCK:PORT, -p [IP:]HOSTPORT:PORT)
// without any host directory in the guest. gVisor's own port forwarding
// is not used: it lost data on bulk transfers here.
//
// The host side (the rungv process) creates every published endpoint
// itself, before it locks itself down: the unix socket HOSTSOCK (mode
// 0600, socketMode; it refuses to replace anything but a stale
// socket of its own) or the TCP listener. For each port it also makes a
// socketpair; one end is donated into the sandbox (runsc run --pass-fd) as
// a file descriptor of the guest's init, the relay (relay_linux.go). For
// every client the host side accepts, it sends the guest a connected unix
// stream socket over that pair with SCM_RIGHTS: the accepted connection
// itself for a unix client, or one end of a new socketpair that it splices
// to a TCP client. The relay connects each one to 127.0.0.1:PORT in the
// guest's netstack.
//
// So the guest holds one pre-connected descriptor per port and nothing
// else of the host: no bind-mounted directory to list, write, symlink or
// fill, no path to connect to, no socket to replace. What it can do with
// the descriptor is read and write the streams it is given (gVisor refuses
// to send descriptors out through an imported host socket). The socket
// file is removed when the episode ends: by the host side, or by the
// supervisor when the host side was killed (it checks the inode first),
// or by the next episode on the same path, which finds it stale.

// socketMode is the mode of a published unix socket: its owner's only.
const socketMode os.FileMode = 0o600

// publishMaxConns bounds the TCP connections of one published port that
// the host side splices at once; beyond it new clients wait in the
// listener's backlog. Unix clients are handed over whole and cost the host
// side nothing after that.
const publishMaxConns = 1024

// PublishedSocketsEnv tells the supervisor which unix sockets to remove if
// the host side dies first: a JSON list of Socket.
const PublishedSocketsEnv = "GVX_PUBLISHED_SOCKETS"

// Socket identifies a socket file the host side created.
type Socket struct {
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Path string `json:"path"`
}

// GuestPassFD is the descriptor number port i's pair has in the guest.
func GuestPassFD(i int) int { return 3 + i }

// publishedPort is one port as the host side serves it.
type publishedPort struct {
	port  spec.Port
	field string       // the spec's name of the port ("ports[1]"), for errors
	ln    net.Listener // *net.UnixListener or *net.TCPListener
	ctl   *net.UnixConn
	guest *os.File // the donated end, until the supervisor has it
	// dev, ino identify the unix socket file this process created.
	dev, ino uint64
}

// Publisher serves an episode's published ports.
type Publisher struct {
	ports []*publishedPort
	wg    sync.WaitGroup
}

// Publish creates every endpoint of ports (it must run before the
// host side locks itself down) or fails and leaves nothing behind.
func Publish(ports []spec.Port) (_ *Publisher, err error) {
	p := &Publisher{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	for i, port := range ports {
		pp := &publishedPort{port: port, field: fmt.Sprintf("ports[%d]", i)}
		p.ports = append(p.ports, pp)
		if port.HostAddr != "" {
			if pp.ln, err = net.Listen("tcp", port.HostAddr); err != nil {
				return nil, fmt.Errorf("%s.host_addr %s: %w", pp.field, port.HostAddr, err)
			}
		} else if err = pp.listenUnix(); err != nil {
			return nil, err
		}
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: socketpair: %w", pp.field, err)
		}
		pp.guest = os.NewFile(uintptr(fds[1]), "publish-guest")
		host := os.NewFile(uintptr(fds[0]), "publish-host")
		c, err := net.FileConn(host)
		host.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pp.field, err)
		}
		pp.ctl = c.(*net.UnixConn)
	}
	return p, nil
}

// socketName names the port's unix socket in errors: the spec's field
// and the path ("ports[0].host_socket /run/x.sock").
func (pp *publishedPort) socketName() string {
	if pp.field == "" {
		return pp.port.HostSocket
	}
	return pp.field + ".host_socket " + pp.port.HostSocket
}

// listenUnix creates the port's socket file, mode socketMode. It is
// bound, given its mode and identified in a private directory of its own
// next to the path, then renamed into place (privdir.ListenUnix): a user
// who owns the path's directory cannot swap the fresh socket for a
// symlink and have the mode set on the file it names.
func (pp *publishedPort) listenUnix() error {
	path, err := filepath.Abs(pp.port.HostSocket)
	if err != nil {
		return err
	}
	pp.port.HostSocket = path
	if err := removeStaleSocket(pp.socketName(), path); err != nil {
		return err
	}
	name := pp.socketName()
	l, id, err := privdir.ListenUnix(path, socketMode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: something was put at the path while the socket was made: remove it or publish on another path", name)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	pp.ln = l // Close removes the file only if it is still this one
	pp.dev, pp.ino = id.Dev, id.Ino
	return nil
}

// removeStaleSocket clears path for a new listener: nothing there is
// fine; a socket of the caller's that nobody listens on (an episode that
// was killed) is removed; anything else is refused.
func removeStaleSocket(name, path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if st.Mode()&os.ModeSocket == 0 || sys == nil || int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%s: the path exists and is not a socket of this user's: remove it or publish on another path", name)
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: a live socket is there (another episode?): stop it or publish on another path", name)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: remove the stale socket: %w", name, err)
	}
	return nil
}

// GuestFiles are the ends to donate to the guest, in port order.
func (p *Publisher) GuestFiles() []*os.File {
	var fs []*os.File
	for _, pp := range p.ports {
		fs = append(fs, pp.guest)
	}
	return fs
}

// CloseGuestFiles drops this process's copies of the donated ends once
// the supervisor has its own.
func (p *Publisher) CloseGuestFiles() {
	for _, pp := range p.ports {
		if pp.guest != nil {
			pp.guest.Close()
			pp.guest = nil
		}
	}
}

// Sockets are the unix socket files this publisher created.
func (p *Publisher) Sockets() []Socket {
	list := []Socket{}
	for _, pp := range p.ports {
		if pp.ino != 0 {
			list = append(list, Socket{pp.dev, pp.ino, pp.port.HostSocket})
		}
	}
	return list
}

// SocketsEnv is PublishedSocketsEnv's value.
func (p *Publisher) SocketsEnv() string {
	b, _ := json.Marshal(p.Sockets())
	return string(b)
}

// RelaySpecs are the relay's arguments: "FD=GUESTPORT" per port.
func RelaySpecs(ports []spec.Port) []string {
	var specs []string
	for i, p := range ports {
		specs = append(specs, strconv.Itoa(GuestPassFD(i))+"="+strconv.Itoa(p.GuestPort))
	}
	return specs
}

// Serve accepts on every port until Close.
func (p *Publisher) Serve() {
	for _, pp := range p.ports {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pp.serve()
		}()
	}
}

func (pp *publishedPort) serve() {
	sem := make(chan struct{}, publishMaxConns)
	for {
		c, err := pp.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		switch c := c.(type) {
		case *net.UnixConn:
			_ = pp.hand(c) // the guest has its own copy now
			c.Close()
		case *net.TCPConn:
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				pp.spliceTCP(c)
			}()
		default:
			c.Close()
		}
	}
}

// hand sends the guest a descriptor of c.
func (pp *publishedPort) hand(c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		_, _, serr = pp.ctl.WriteMsgUnix([]byte{1}, unix.UnixRights(int(fd)), nil)
	})
	if err == nil {
		err = serr
	}
	return err
}

// spliceTCP gives the guest one end of a new socketpair and copies
// between c and the other.
func (pp *publishedPort) spliceTCP(c *net.TCPConn) {
	defer c.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	gf := os.NewFile(uintptr(fds[1]), "tcp-guest")
	hf := os.NewFile(uintptr(fds[0]), "tcp-host")
	_, _, err = pp.ctl.WriteMsgUnix([]byte{1}, unix.UnixRights(fds[1]), nil)
	gf.Close()
	if err != nil {
		hf.Close()
		return
	}
	hc, err := net.FileConn(hf)
	hf.Close()
	if err != nil {
		return
	}
	splice(hc.(*net.UnixConn), c)
}

// Close stops serving, closes every endpoint and removes the socket files
// this process created (only if they are still the ones it created).
func (p *Publisher) Close() {
	for _, pp := range p.ports {
		if pp.ln != nil {
			pp.ln.Close()
		}
		if pp.ctl != nil {
			pp.ctl.Close()
		}
		if pp.guest != nil {
			pp.guest.Close()
		}
		if pp.ino != 0 {
			removeIfSame(pp.port.HostSocket, pp.dev, pp.ino)
		}
	}
	p.wg.Wait()
}

// removeIfSame unlinks path if it is still the file (dev, ino).
func removeIfSame(path string, dev, ino uint64) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil && st.Dev == dev && st.Ino == ino {
		_ = os.Remove(path)
	}
}

// ParseSockets parses PublishedSocketsEnv's value.
func ParseSockets(env string) []Socket {
	var list []Socket
	if json.Unmarshal([]byte(env), &list) != nil {
		return nil
	}
	return list
}

// RemoveSockets removes each socket file that is still the one created
// (the supervisor's clean-up, for a host side that died first; the sweep's).
func RemoveSockets(list []Socket) {
	for _, e := range list {
		removeIfSame(e.Path, e.Dev, e.Ino)
	}
}

// SocketDirs are the directories of list's sockets, where a locked-down
// process must still remove them (Landlock).
func SocketDirs(list []Socket) []string {
	var dirs []string
	for _, e := range list {
		dirs = append(dirs, filepath.Dir(e.Path))
	}
	return dirs
}

// Dirs are the directories of the sockets this Publisher created.
func (p *Publisher) Dirs() []string { return SocketDirs(p.Sockets()) }

// RelayWord sends the guest's relay a control word (relaylinks_linux.go)
// over the first port's pair and, with wait > 0, waits that long for its
// answer. An episode without published ports has no relay: nothing is
// sent. The guest holds the other end: a relay that stops reading (its
// receive queue full of connections it never took) or never answers
// costs the caller at most relayWordSend plus wait, never a hang.
func (p *Publisher) RelayWord(word string, wait time.Duration) error {
	if p == nil || len(p.ports) == 0 {
		return nil
	}
	c := p.ports[0].ctl
	if err := sendBy(c, []byte(word), time.Now().Add(relayWordSend)); err != nil {
		return fmt.Errorf("relay control word: %w", err)
	}
	if wait <= 0 {
		return nil
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 64)
	n, _, _, _, err := c.ReadMsgUnix(b, nil)
	if err != nil {
		return err
	}
	if string(b[:n]) != linksOK {
		return fmt.Errorf("relay answered %q", b[:n])
	}
	return nil
}

// relayWordSend bounds how long RelayWord waits for room to send.
const relayWordSend = time.Second

// sendBy sends b on c without descriptors, waiting for room until
// deadline. It leaves c's own write deadline alone: the port's accept
// loop hands connections over the same pair meanwhile.
func sendBy(c *net.UnixConn, b []byte, deadline time.Time) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.Sendmsg(int(fd), b, nil, nil, unix.MSG_DONTWAIT)
		}); err != nil {
			return err
		}
		if serr != unix.EAGAIN {
			return serr
		}
		if time.Now().After(deadline) {
			return errors.New("the guest's relay takes nothing (its queue is full)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
