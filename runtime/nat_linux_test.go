package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

func TestNATTarget(t *testing.T) {
	for _, c := range []struct {
		dst  string
		port uint16
		dns  string
		want string // "" refused
	}{
		{"10.0.2.2", 8080, "", "127.0.0.1:8080"},
		{"10.0.2.3", 53, "192.0.2.53:53", "192.0.2.53:53"},
		{"10.0.2.3", 53, "[2001:db8::1]:53", "[2001:db8::1]:53"},
		{"10.0.2.3", 53, "", ""},
		{"10.0.2.3", 80, "192.0.2.53:53", ""},
		{"10.0.2.15", 80, "", ""},
		{"10.0.2.99", 80, "", ""},
		{"0.0.0.0", 80, "", ""},
		{"255.255.255.255", 67, "", ""},
		{"224.0.0.251", 5353, "", ""},
		{"192.0.2.7", 443, "", "192.0.2.7:443"},
		{"10.0.3.1", 22, "", "10.0.3.1:22"},
	} {
		got, ok := natTarget(net.ParseIP(c.dst).To4(), c.port, c.dns)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("natTarget(%s, %d, %q) = %q, %v; want %q", c.dst, c.port, c.dns, got, ok, c.want)
		}
	}
}

func TestFirstNameserver(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"# comment\nsearch example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n": "192.0.2.53",
		"nameserver fe80::1%eth0\n":          "fe80::1",
		"nameserver bogus\nnameserver ::1\n": "::1",
		"options ndots:2\n":                  "",
		"nameserver\n":                       "",
	} {
		p := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := firstNameserver(p); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
	if got := firstNameserver(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

func TestIsSandboxNetRun(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--root=/r", "--network=sandbox", "--gso=false", "run", "--detach", "--bundle=/b", "id"}, true},
		{[]string{"--root=/r", "--network=none", "run", "--bundle=/b", "id"}, false},
		{[]string{"--network=sandbox", "kill", "id", "9"}, false},
		{[]string{"--network=sandbox", "boot", "run"}, false},
		{[]string{"run"}, false},
		{nil, false},
	} {
		if got := isSandboxNetRun(c.args); got != c.want {
			t.Errorf("isSandboxNetRun(%q) = %v", c.args, got)
		}
	}
	if !natEnabled(append([]string{"--root=/r"}, networkRunscFlags(NetworkNAT)...)) || natEnabled(networkRunscFlags(NetworkNone)) {
		t.Error("natEnabled does not tell NAT's runsc flags from none's")
	}
}

func TestAssembleRejectsBadJumps(t *testing.T) {
	if _, err := assemble([]bpfInsn{{jt: "nowhere"}}); err == nil {
		t.Error("a jump to a missing label was accepted")
	}
	if _, err := assemble([]bpfInsn{{label: "back"}, {jt: "back"}}); err == nil {
		t.Error("a backward jump was accepted")
	}
}

// TestLockdownNAT runs LockdownNAT in a child: AF_INET/AF_INET6 stream and
// datagram sockets and connect work; raw sockets, every other family,
// bind, socketpair and exec are refused.
func TestLockdownNAT(t *testing.T) {
	if os.Getenv("GVX_LOCKDOWN_NAT_CHILD") == "1" {
		lockdownNATChild()
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockdownNAT$")
	cmd.Env = append(os.Environ(), "GVX_LOCKDOWN_NAT_CHILD=1", "GVX_LOCKDOWN_NAT_ADDR="+l.Addr().String())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("lockdown-nat-ok")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func lockdownNATChild() {
	fail := func(msg string) {
		os.Stdout.WriteString("FAIL: " + msg + "\n")
		os.Exit(1)
	}
	// Opened before: once locked down the host side reaches no path
	// outside its state directory (Landlock).
	status, err := os.Open("/proc/self/status")
	if err != nil {
		fail(err.Error())
	}
	if err := LockdownNAT(""); err != nil {
		fail(err.Error())
	}
	st, _ := io.ReadAll(status)
	if !bytes.Contains(st, []byte("NoNewPrivs:\t1")) || !bytes.Contains(st, []byte("Seccomp:\t2")) {
		fail("status: " + string(st))
	}
	c, err := net.Dial("tcp", os.Getenv("GVX_LOCKDOWN_NAT_ADDR"))
	if err != nil {
		fail("dial: " + err.Error())
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		fail("read from the host server")
	}
	c.Close()
	if fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM, 0); err == nil {
		unix.Close(fd)
	} else if errors.Is(err, unix.EPERM) {
		fail("AF_INET6 socket refused")
	}
	for _, fam := range []int{unix.AF_UNIX, unix.AF_PACKET, unix.AF_NETLINK} {
		if _, err := unix.Socket(fam, unix.SOCK_DGRAM, 0); !errors.Is(err, unix.EPERM) {
			fail("a socket of another family was not refused")
		}
	}
	if _, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP); !errors.Is(err, unix.EPERM) {
		fail("a raw inet socket was not refused")
	}
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		fail("a non-blocking datagram socket was refused")
	} else {
		unix.Close(fd)
	}
	if _, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0); !errors.Is(err, unix.EPERM) {
		fail("socketpair was not refused")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		fail("socket: " + err.Error())
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{}); !errors.Is(err, unix.EPERM) {
		fail("bind was not refused")
	}
	// Refused by seccomp (EPERM), or before that by Landlock at /dev/null.
	if err := exec.Command("/bin/true").Run(); err == nil || !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		fail("exec was not refused")
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); !errors.Is(err, unix.EPERM) {
		fail("unshare was not refused")
	}
	os.Stdout.WriteString("lockdown-nat-ok\n")
	os.Exit(0)
}

// natPair starts the host side of the NAT in this process on one end of a
// datagram socket pair (standing in for the packet socket on gvx0, sent as
// the supervisor sends it) and returns a guest netstack (10.0.2.15/24, as
// the Sentry is configured) on the other end. No root needed.
func natPair(t testing.TB, dns string) (*stack.Stack, *natHost) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNATHost()
	if err != nil {
		t.Fatal(err)
	}
	n.dns = dns
	if err := unix.Sendmsg(int(n.Child.Fd()), []byte{1}, unix.UnixRights(fds[0]), nil, 0); err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[0])
	if err := n.serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)

	ep, err := fdbased.New(&fdbased.Options{FDs: []int{fds[1]}, MTU: natMTU, EthernetHeader: true, Address: tcpip.LinkAddress(natGuestMAC)})
	if err != nil {
		t.Fatal(err)
	}
	g := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	t.Cleanup(func() { g.Close(); g.Wait(); unix.Close(fds[1]) })
	if e := g.CreateNIC(1, ep); e != nil {
		t.Fatal(e)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4Slice(natGuestIP), PrefixLen: 24}}
	if e := g.AddProtocolAddress(1, pa, stack.AddressProperties{}); e != nil {
		t.Fatal(e)
	}
	g.SetRouteTable([]tcpip.Route{{Destination: header4Any(), Gateway: tcpip.AddrFrom4Slice(natGatewayIP), NIC: 1}})
	return g, n
}

func guestAddr(ip net.IP, port int) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(ip.To4()), Port: uint16(port)}
}

// TestNATHostSide drives the host side with a guest netstack in process:
// HTTP to the host's loopback through 10.0.2.2 (2 MiB, byte-identical),
// UDP both ways, the DNS forward, a refused port.
func TestNATHostSide(t *testing.T) {
	body := make([]byte, 2<<20)
	rand.Read(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	echo, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			m, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(append([]byte("echo:"), buf[:m]...), from)
		}
	}()
	g, _ := natPair(t, echo.LocalAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return gonet.DialContextTCP(ctx, g, guestAddr(natGatewayIP, port), ipv4.ProtocolNumber)
	}}}
	resp, err := client.Get("http://10.0.2.2/blob")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("HTTP through 10.0.2.2: %d bytes, %v", len(got), err)
	}

	for _, c := range []struct {
		ip   net.IP
		port int
	}{{natGatewayIP, echo.LocalAddr().(*net.UDPAddr).Port}, {natDNSIP, 53}} {
		uc, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(c.ip), Port: uint16(c.port)}, ipv4.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		uc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := uc.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		m, err := uc.Read(buf)
		if err != nil || string(buf[:m]) != "echo:ping" {
			t.Fatalf("UDP to %s:%d: %q, %v", c.ip, c.port, buf[:m], err)
		}
		uc.Close()
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if c, err := gonet.DialContextTCP(ctx, g, guestAddr(natGatewayIP, closed), ipv4.ProtocolNumber); err == nil {
		c.Close()
		t.Fatal("a closed host port accepted the guest's connection")
	}
}

// TestNATServeNoSocket: a supervisor that exits without sending the socket
// ends serve with errNATNoSocket (silently reported); Close unblocks it.
func TestNATServeNoSocket(t *testing.T) {
	n, err := newNATHost()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.serve(); !errors.Is(err, errNATNoSocket) {
		t.Fatalf("serve = %v, want errNATNoSocket", err)
	}
	n.Close()

	n, err = newNATHost()
	if err != nil {
		t.Fatal(err)
	}
	child, err := unix.Dup(int(n.Child.Fd())) // a supervisor still alive
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(child)
	done := make(chan error, 1)
	go func() { done <- n.serve() }()
	time.Sleep(50 * time.Millisecond)
	n.Close()
	select {
	case err := <-done:
		if !errors.Is(err, errNATNoSocket) {
			t.Fatalf("serve after Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end serve")
	}
}

// BenchmarkNATHostSide: 64 MiB from a host server on 127.0.0.1 to an
// in-process guest netstack (default options, over a unix datagram socket
// pair) through the host side: no Sentry, but two netstacks share this
// process, so it is a bound on the host side's cost, not its cost alone.
func BenchmarkNATHostSide(b *testing.B) {
	const size = 64 << 20
	body := make([]byte, size)
	rand.Read(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	g, _ := natPair(b, "")
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := gonet.DialContextTCP(context.Background(), g, guestAddr(natGatewayIP, port), ipv4.ProtocolNumber)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if err != nil || n < size {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
}

// TestNATUDPOneWay: a UDP flow that only the host side talks on stays up
// past the idle time (idle means no datagram either way), and an idle flow
// is closed.
func TestNATUDPOneWay(t *testing.T) {
	defer func(d time.Duration) { natUDPIdle = d }(natUDPIdle)
	natUDPIdle = 300 * time.Millisecond
	srv, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		_, from, err := srv.ReadFrom(buf)
		if err != nil {
			return
		}
		for i := 0; i < 10; i++ {
			time.Sleep(100 * time.Millisecond)
			srv.WriteTo([]byte{byte(i)}, from)
		}
	}()
	g, n := natPair(t, "")
	uc, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(natGatewayIP), Port: uint16(srv.LocalAddr().(*net.UDPAddr).Port)}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	uc.Write([]byte("stream"))
	buf := make([]byte, 64)
	for i := 0; i < 10; i++ {
		if m, err := uc.Read(buf); err != nil || m != 1 || buf[0] != byte(i) {
			t.Fatalf("datagram %d: %v %v (the flow closed while the host side talked?)", i, buf[:m], err)
		}
	}
	open := func() int { n.mu.Lock(); defer n.mu.Unlock(); return len(n.open) }
	if open() != 1 {
		t.Fatalf("%d relays open, want 1", open())
	}
	for deadline := time.Now().Add(5 * time.Second); open() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle flow was not closed")
		}
	}
}
