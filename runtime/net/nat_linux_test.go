package episodenet

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	linkpipe "gvisor.dev/gvisor/pkg/tcpip/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"z.gfire.dev/gvx/runtime/egress"
)

func TestNATTarget(t *testing.T) {
	var rules []egress.Rule
	for _, r := range []string{"deny=192.0.2.53:53", "allow=169.254.169.254:80", "allow=10.7.0.0/16:443"} {
		rule, err := egress.ParseRule(r)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, rule)
	}
	p := egress.New(rules, []uint16{8080}, []netip.Addr{netip.MustParseAddr("198.51.100.7")})
	for _, c := range []struct {
		dst  string
		port uint16
		dns  string
		want string // "" refused
	}{
		{"10.0.2.2", 8080, "", "127.0.0.1:8080"},
		{"::ffff:10.0.2.2", 8080, "", "127.0.0.1:8080"},
		{"10.0.2.2", 8081, "", ""}, // not an allowed host port
		{"10.0.2.2", 22, "", ""},
		{"10.0.2.3", 53, "198.18.0.53:53", "198.18.0.53:53"},
		{"10.0.2.3", 53, "127.0.0.53:53", "127.0.0.53:53"}, // a resolver on loopback: the exception
		{"10.0.2.3", 53, "[2001:db8::1]:53", "[2001:db8::1]:53"},
		{"10.0.2.3", 53, "192.0.2.53:53", ""}, // a deny rule wins
		{"10.0.2.3", 53, "", ""},
		{"10.0.2.3", 80, "198.18.0.53:53", ""},
		{"10.0.2.15", 80, "", ""},
		{"10.0.2.99", 80, "", ""},
		{"0.0.0.0", 8080, "", ""},
		{"255.255.255.255", 67, "", ""},
		{"224.0.0.251", 5353, "", ""},
		{"192.0.2.7", 443, "", "192.0.2.7:443"},
		{"10.0.3.1", 22, "", ""},
		{"10.7.1.1", 443, "", "10.7.1.1:443"},
		{"10.7.1.1", 80, "", ""},
		{"127.0.0.1", 8080, "", ""},
		{"127.1.2.3", 8080, "", ""},
		{"::ffff:127.0.0.1", 8080, "", ""},
		{"127.0.0.53", 53, "127.0.0.53:53", ""}, // the resolver, dialed directly
		{"169.254.169.254", 80, "", "169.254.169.254:80"},
		{"::ffff:169.254.169.254", 80, "", "169.254.169.254:80"},
		{"169.254.169.254", 8080, "", ""},
		{"172.17.0.1", 2375, "", ""},
		{"198.51.100.7", 80, "", ""}, // the host's own address
	} {
		got, d := natTarget(p, netip.MustParseAddr(c.dst), c.port, c.dns)
		if d.Allow != (c.want != "") || (d.Allow && got.String() != c.want) {
			t.Errorf("natTarget(%s, %d, %q) = %s, %+v; want %q", c.dst, c.port, c.dns, got, d, c.want)
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
		if got := FirstNameserver(p); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
	if got := FirstNameserver(filepath.Join(dir, "missing")); got != "" {
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
		if got := IsSandboxNetRun(c.args); got != c.want {
			t.Errorf("IsSandboxNetRun(%q) = %v", c.args, got)
		}
	}
}

// natPair starts the host side of the NAT in this process on one end of a
// datagram socket pair (standing in for the packet socket on gvx0, sent as
// the supervisor sends it) and returns a guest netstack (10.0.2.15/24, as
// the Sentry is configured) on the other end. No root needed.
func natPair(t testing.TB, dns string, c NATConfig) (*stack.Stack, *NAT) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNAT(c)
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

	ep, err := fdbased.New(&fdbased.Options{FDs: []int{fds[1]}, MTU: MTU, EthernetHeader: true, Address: tcpip.LinkAddress(GuestMAC)})
	if err != nil {
		t.Fatal(err)
	}
	// The guest may send to 127.0.0.0/8 on eth0, as a guest with raw
	// sockets can: the host side must refuse it itself.
	g := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocolWithOptions(ipv4.Options{AllowExternalLoopbackTraffic: true}), arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	t.Cleanup(func() { g.Close(); g.Wait(); unix.Close(fds[1]) })
	if e := g.CreateNIC(1, ep); e != nil {
		t.Fatal(e)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4Slice(GuestIP), PrefixLen: 24}}
	if e := g.AddProtocolAddress(1, pa, stack.AddressProperties{}); e != nil {
		t.Fatal(e)
	}
	g.SetRouteTable([]tcpip.Route{{Destination: header4Any(), Gateway: tcpip.AddrFrom4Slice(GatewayIP), NIC: 1}})
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	g, _ := natPair(t, echo.LocalAddr().String(), NATConfig{HostPorts: []int{port, echo.LocalAddr().(*net.UDPAddr).Port, closed}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return gonet.DialContextTCP(ctx, g, guestAddr(GatewayIP, port), ipv4.ProtocolNumber)
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
	}{{GatewayIP, echo.LocalAddr().(*net.UDPAddr).Port}, {DNSIP, 53}} {
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

	// A closed host port is refused when allowed too.
	if c, err := gonet.DialContextTCP(ctx, g, guestAddr(GatewayIP, closed), ipv4.ProtocolNumber); err == nil {
		c.Close()
		t.Fatal("a closed host port accepted the guest's connection")
	}
}

// TestNATRoutesThroughGuest: a network behind the guest (dockerd's bridge,
// 172.17.0.0/16 on another interface of the guest, which forwards, as the
// Sentry does for docker0) reaches the host with its own source addresses
// (no MASQUERADE in the Sentry): the host side sends the answers to the
// guest's link address, not to an ARP lookup of 172.17.0.2 that nothing on
// the link would answer.
func TestNATRoutesThroughGuest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("from-host")) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	g, _ := natPair(t, "", NATConfig{HostPorts: []int{port}})
	// The container: its own stack, 172.17.0.2/16, default via the
	// guest's bridge address 172.17.0.1, on a point-to-point link.
	toGuest, toContainer := linkpipe.New("\x02\x42\xac\x11\x00\x02", "\x02\x42\xac\x11\x00\x01", MTU)
	ctr := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
	})
	t.Cleanup(func() { ctr.Close(); ctr.Wait() })
	const bridgeNIC = 2
	container := tcpip.AddrFrom4([4]byte{172, 17, 0, 2})
	bridge := tcpip.AddrFrom4([4]byte{172, 17, 0, 1})
	for _, n := range []struct {
		st   *stack.Stack
		nic  tcpip.NICID
		ep   stack.LinkEndpoint
		addr tcpip.Address
	}{{ctr, 1, ethernet.New(toGuest), container}, {g, bridgeNIC, ethernet.New(toContainer), bridge}} {
		if e := n.st.CreateNIC(n.nic, n.ep); e != nil {
			t.Fatal(e)
		}
		pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: n.addr, PrefixLen: 16}}
		if e := n.st.AddProtocolAddress(n.nic, pa, stack.AddressProperties{}); e != nil {
			t.Fatal(e)
		}
	}
	bridgeNet := tcpip.AddressWithPrefix{Address: bridge, PrefixLen: 16}.Subnet()
	ctr.SetRouteTable([]tcpip.Route{{Destination: header4Any(), Gateway: bridge, NIC: 1}})
	g.SetRouteTable(append([]tcpip.Route{{Destination: bridgeNet, NIC: bridgeNIC}}, g.GetRouteTable()...))
	if e := g.SetForwardingDefaultAndAllNICs(ipv4.ProtocolNumber, true); e != nil {
		t.Fatal(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, ctr, tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(GatewayIP), Port: uint16(port)}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("dial from 172.17.0.2 (behind the guest): %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.HasSuffix(got, []byte("from-host")) {
		t.Fatalf("answer to 172.17.0.2: %q, %v", got, err)
	}
}

// TestNATServeNoSocket: a supervisor that exits without sending the socket
// ends serve with errNATNoSocket (silently reported); Close unblocks it.
func TestNATServeNoSocket(t *testing.T) {
	n, err := NewNAT(NATConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.serve(); !errors.Is(err, errNATNoSocket) {
		t.Fatalf("serve = %v, want errNATNoSocket", err)
	}
	n.Close()

	n, err = NewNAT(NATConfig{})
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
	g, _ := natPair(b, "", NATConfig{HostPorts: []int{port}})
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := gonet.DialContextTCP(context.Background(), g, guestAddr(GatewayIP, port), ipv4.ProtocolNumber)
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
	g, n := natPair(t, "", NATConfig{HostPorts: []int{srv.LocalAddr().(*net.UDPAddr).Port}})
	uc, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(GatewayIP), Port: uint16(srv.LocalAddr().(*net.UDPAddr).Port)}, ipv4.ProtocolNumber)
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

// countingListener accepts on addr, writes "secret" to every connection
// and counts the connections: a host service the guest must not reach.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func listenCounting(t *testing.T, addr string) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			cl.accepted.Add(1)
			c.Write([]byte("secret"))
			c.Close()
		}
	}()
	return cl
}

func (l *countingListener) port() int { return l.Addr().(*net.TCPAddr).Port }

// guestFetch connects from the guest netstack to ip:port and reads what
// the server says; an error if the connection is refused or not
// answered in wait.
func guestFetch(g *stack.Stack, ip net.IP, port int, wait time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, g, guestAddr(ip, port), ipv4.ProtocolNumber)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// hostIPv4 is a non-loopback IPv4 address of this host, or nil.
func hostIPv4(t *testing.T) net.IP {
	addrs, err := egress.HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.Is4() && !a.IsLoopback() && !a.IsLinkLocalUnicast() && isLocalAddr(a) {
			return net.IP(a.AsSlice())
		}
	}
	return nil
}

// TestNATEgressDefaultDeny plays the attacker against a host service on
// every host address (0.0.0.0:PORT): by default the guest reaches it
// neither through 10.0.2.2, nor as 127.0.0.1, 127.1.2.3 or 0.0.0.0, nor
// on the host's own address; the service never sees a connection. Then
// the same destinations work once allowed (so the refusals were the
// policy's): --allow-host-port for 10.0.2.2, --egress allow=… for the
// others; 0.0.0.0 stays refused even with allow=0.0.0.0/0.
func TestNATEgressDefaultDeny(t *testing.T) {
	srv := listenCounting(t, "0.0.0.0:0")
	port := srv.port()
	own := hostIPv4(t)
	targets := []net.IP{GatewayIP, net.IPv4(127, 0, 0, 1), net.IPv4(127, 1, 2, 3), net.IPv4zero}
	if own != nil {
		targets = append(targets, own)
	} else {
		t.Log("no non-loopback IPv4 address here: the host's own address is not tried")
	}

	g, _ := natPair(t, "", NATConfig{})
	for _, ip := range targets {
		if got, err := guestFetch(g, ip, port, 1500*time.Millisecond); err == nil {
			t.Errorf("default policy: the guest reached the host's 0.0.0.0:%d as %s:%d and read %q", port, ip, port, got)
		}
	}
	if n := srv.accepted.Load(); n != 0 {
		t.Fatalf("default policy: the host service accepted %d connections", n)
	}

	// Allowed: each works.
	allowAll, err := egress.ParseRule("allow=0.0.0.0/0:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	g, _ = natPair(t, "", NATConfig{HostPorts: []int{port}, Rules: []egress.Rule{allowAll}})
	for _, ip := range targets {
		if ip.IsLoopback() || ip.IsUnspecified() {
			// Never a destination from eth0: the host netstack drops
			// loopback sources and destinations, the policy 0.0.0.0.
			if got, err := guestFetch(g, ip, port, 1500*time.Millisecond); err == nil {
				t.Errorf("allow=0.0.0.0/0:%d opened %s (the host's loopback): read %q", port, ip, got)
			}
			continue
		}
		got, err := guestFetch(g, ip, port, 10*time.Second)
		if err != nil || got != "secret" {
			t.Errorf("allowed: %s:%d: %q, %v", ip, port, got, err)
		}
	}

	// Host ports and rules are per port: another port stays refused.
	other := listenCounting(t, "127.0.0.1:0")
	for _, ip := range []net.IP{GatewayIP, net.IPv4(127, 0, 0, 1)} {
		if got, err := guestFetch(g, ip, other.port(), 1500*time.Millisecond); err == nil {
			t.Errorf("%s:%d (not allowed) answered %q", ip, other.port(), got)
		}
	}
	if n := other.accepted.Load(); n != 0 {
		t.Fatalf("a port that was not allowed accepted %d connections", n)
	}
}

// TestNATEgressUDP: UDP to a host service on 127.0.0.1 through 10.0.2.2
// gets no answer by default (the service sees no datagram), and one with
// the port allowed.
func TestNATEgressUDP(t *testing.T) {
	echo, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	var seen atomic.Int32
	go func() {
		buf := make([]byte, 2048)
		for {
			m, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			seen.Add(1)
			echo.WriteTo(buf[:m], from)
		}
	}()
	port := echo.LocalAddr().(*net.UDPAddr).Port
	ask := func(g *stack.Stack, ip net.IP, wait time.Duration) error {
		uc, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(ip.To4()), Port: uint16(port)}, ipv4.ProtocolNumber)
		if err != nil {
			return err
		}
		defer uc.Close()
		uc.SetDeadline(time.Now().Add(wait))
		if _, err := uc.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 16)
		_, err = uc.Read(buf)
		return err
	}
	g, _ := natPair(t, "", NATConfig{})
	for _, ip := range []net.IP{GatewayIP, net.IPv4(127, 0, 0, 1)} {
		if err := ask(g, ip, 500*time.Millisecond); err == nil {
			t.Errorf("default policy: UDP to %s:%d was answered", ip, port)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("default policy: the host service got %d datagrams", n)
	}
	g, _ = natPair(t, "", NATConfig{HostPorts: []int{port}})
	if err := ask(g, GatewayIP, 10*time.Second); err != nil {
		t.Fatalf("--allow-host-port %d: %v", port, err)
	}
}

// TestNATIsLocalAddr: the connect-time check that catches host addresses
// added after the episode started tells the host's addresses from others.
// (A connected UDP socket sends nothing.)
func TestNATIsLocalAddr(t *testing.T) {
	if !isLocalAddr(netip.MustParseAddr("127.0.0.1")) || !isLocalAddr(netip.MustParseAddr("127.9.9.9")) || !isLocalAddr(netip.MustParseAddr("0.0.0.0")) {
		t.Error("loopback is not local")
	}
	if ip := hostIPv4(t); ip != nil && !isLocalAddr(netip.AddrFrom4([4]byte(ip.To4()))) {
		t.Errorf("the host's own %s is not local", ip)
	}
	far := netip.MustParseAddr("192.0.2.1")
	if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(far, 9))); err != nil {
		t.Logf("no route to %s here: only the local side is checked", far)
	} else {
		c.Close()
		if isLocalAddr(far) {
			t.Errorf("%s (routed, not local) counts as local", far)
		}
	}
}

// TestNATRelayCap: with NATMaxRelays 2 a third connection is refused
// while two are open, and works once one closes; the relays' host sockets
// have the fixed buffer size, not the kernel's autotuned ones.
func TestNATRelayCap(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
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
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	g, n := natPair(t, "", NATConfig{HostPorts: []int{port}, MaxRelays: 2})
	dial := func() (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := gonet.DialContextTCP(ctx, g, guestAddr(GatewayIP, port), ipv4.ProtocolNumber)
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	a, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	b, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Fatal("a third relay opened past NATMaxRelays 2")
	}
	n.mu.Lock()
	for c := range n.open {
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		rc.Control(func(fd uintptr) {
			for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
				// The kernel doubles what was set (socket(7)).
				if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, o); err != nil || v != 2*natSockBuf {
					t.Errorf("relay socket option %d = %d, %v; want %d", o, v, err, 2*natSockBuf)
				}
			}
		})
	}
	n.mu.Unlock()
	a.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no relay after one closed: %v", err)
		}
	}
	b.Close()
}

// TestNATDNSFlowIdle: a DNS flow (to 10.0.2.3:53) gives its relay slot
// back after natDNSIdle, long before natUDPIdle.
func TestNATDNSFlowIdle(t *testing.T) {
	defer func(d time.Duration) { natDNSIdle = d }(natDNSIdle)
	natDNSIdle = 200 * time.Millisecond
	echo, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			m, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(buf[:m], from)
		}
	}()
	g, n := natPair(t, echo.LocalAddr().String(), NATConfig{})
	uc, err := gonet.DialUDP(g, nil, &tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4Slice(DNSIP), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := uc.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	relays := func() int { n.mu.Lock(); defer n.mu.Unlock(); return n.relays }
	if relays() != 1 {
		t.Fatalf("%d relays, want 1", relays())
	}
	for deadline := time.Now().Add(5 * time.Second); relays() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the DNS flow still holds its relay slot")
		}
	}
}
