package episodenet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"z.gfire.dev/gvx/runtime/egress"
	"z.gfire.dev/gvx/spec"
)

// --network nat: slirp's layout, built from a veth pair in the episode's
// network namespace and a gVisor netstack in the host process.
//
//	guest (Sentry netstack, eth0 10.0.2.15/24, default via 10.0.2.2)
//	  │ AF_PACKET socket on eth0 (runsc --network=sandbox scrapes eth0)
//	eth0 ═══ veth ═══ gvx0                (episode's network namespace)
//	                   │ AF_PACKET socket, made by the supervisor, passed
//	                   │ to the host process with SCM_RIGHTS
//	host process: netstack (10.0.2.2, 10.0.2.3, promiscuous) whose TCP and
//	UDP forwarders dial the destination with the host's own sockets.
//
// No device node is needed (/dev/net/tun is often root-only), and the
// kernel stack of the episode's namespace never sees an address: runsc
// removes eth0's after scraping it, and gvx0 never has one.
const (
	// NATFD is the supervisor's end of the unix socket the packet
	// socket is sent over.
	NATFD = 4
	// GuestIf and natHostIf are the two ends of the veth pair.
	GuestIf   = "eth0"
	natHostIf = "gvx0"
	// MTU is slirp4netns's recommended MTU: fewer, larger frames.
	MTU = 65520
	// natMaxInFlight bounds the guest's TCP connections the host side
	// is still connecting (SYN received, host connect not done); SYNs
	// beyond it are dropped (the guest retries them).
	natMaxInFlight = 64
	// natSockBuf is SO_RCVBUF and SO_SNDBUF of every host socket of a
	// relay (the kernel doubles it): fixed, so that the kernel does not
	// autotune a relay's buffers up to tcp_rmem's and tcp_wmem's maximum.
	natSockBuf = 256 << 10
	// natTCPBuf is the host netstack's per-connection TCP receive and
	// send buffer (the guest's window; what it may leave unread).
	natTCPBuf = 256 << 10
	// natDialTimeout bounds a host-side TCP connect.
	natDialTimeout = 10 * time.Second
	// DNSEnv, when set, is the IP:port the guest's DNS server
	// (10.0.2.3:53) forwards to, instead of /etc/resolv.conf's first
	// nameserver (reached even on loopback: the egress policy's one
	// exception, egress.Policy.Resolver).
	DNSEnv = "GVX_NAT_DNS"
)

// natUDPIdle closes a UDP flow without traffic either way for this long,
// natDNSIdle a flow to the DNS address (one per lookup, often: they must
// not hold relay slots for a minute) (variables for tests).
var (
	natUDPIdle = 60 * time.Second
	natDNSIdle = 5 * time.Second
)

// The guest's view, as slirp lays it out.
var (
	GuestIP   = net.IPv4(10, 0, 2, 15).To4()
	GatewayIP = net.IPv4(10, 0, 2, 2).To4()
	DNSIP     = net.IPv4(10, 0, 2, 3).To4()
	GuestMAC  = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	HostMAC   = net.HardwareAddr{0x52, 0x55, 0x0a, 0x00, 0x02, 0x02}
)

// ResolvConf is the guest's /etc/resolv.conf.
const ResolvConf = "nameserver 10.0.2.3\n"

// natRunscFlags are the runsc flags of a NAT episode: the Sentry takes
// eth0 over from the namespace, segments its own packets (a veth passes
// GSO frames through, which the host side would see with partial
// checksums).
var natRunscFlags = []string{"--network=sandbox", "--gso=false"}

// RunscFlags are runsc's flags for a network mode.
func RunscFlags(m spec.NetworkMode) []string {
	if m == spec.NetworkNAT {
		return natRunscFlags
	}
	return []string{"--network=" + string(m)}
}

// SetupNAT runs in the supervisor, root in the episode's user namespace
// that owns its network namespace: it makes the veth pair, gives eth0 the
// guest's address and default route, and sends a packet socket bound to
// gvx0 to the host side over NATFD.
func SetupNAT() error {
	sock := os.NewFile(NATFD, "nat")
	defer sock.Close()
	// No IPv6 on either end: a link-local address on gvx0 would make
	// runsc take it over as a second guest interface. Where /proc/sys is
	// read-only (some containers), gvx0's addresses are deleted below.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0)
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: GuestIf, MTU: MTU, HardwareAddr: GuestMAC, TxQLen: 1000},
		PeerName:         natHostIf,
		PeerHardwareAddr: HostMAC,
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth pair: %w", err)
	}
	guest, err := netlink.LinkByName(GuestIf)
	if err != nil {
		return err
	}
	host, err := netlink.LinkByName(natHostIf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMTU(host, MTU); err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: GuestIP, Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(guest, addr); err != nil {
		return fmt.Errorf("address %s: %w", addr, err)
	}
	for _, l := range []netlink.Link{host, guest} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("bring up %s: %w", l.Attrs().Name, err)
		}
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: guest.Attrs().Index, Gw: GatewayIP}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	if addrs, err := netlink.AddrList(host, netlink.FAMILY_ALL); err == nil {
		for i := range addrs {
			_ = netlink.AddrDel(host, &addrs[i])
		}
	}
	if addrs, err := netlink.AddrList(host, netlink.FAMILY_ALL); err != nil || len(addrs) > 0 {
		return fmt.Errorf("%s must have no address (IPv6 could not be disabled?): %v %v", natHostIf, addrs, err)
	}
	// Protocol 0 until bind: a socket made with a protocol unhooks it
	// again at bind, which waits for an RCU grace period (~10 ms).
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: host.Attrs().Index}); err != nil {
		return fmt.Errorf("bind packet socket to %s: %w", natHostIf, err)
	}
	// The *FORCE variants need CAP_NET_ADMIN in the initial namespace;
	// without it the buffers stay at net.core.[rw]mem_max.
	const buf = 4 << 20
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], buf) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], buf)
		}
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("send the packet socket to the host side: %w", err)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// NAT is the host side of the NAT: a netstack on the packet socket
// the supervisor sends, forwarding to the host's own sockets.
type NAT struct {
	conn  *os.File // our end of the socket pair
	Child *os.File // the supervisor's end (its NATFD)
	dns   string   // IP:port that 10.0.2.3:53 forwards to; "" refuses
	// policy decides every destination (package egress).
	policy *egress.Policy
	// maxRelays bounds the host sockets the guest can hold open (TCP
	// connections and UDP flows); beyond it new ones are refused.
	maxRelays int

	mu     sync.Mutex
	st     *stack.Stack
	fd     int
	closed bool
	relays int                    // relays holding a slot of maxRelays
	open   map[io.Closer]struct{} // host sockets of live relays
}

// NewNAT makes the socket pair, reads the host's own addresses for
// the egress policy and the DNS target (GVX_NAT_DNS, else the first
// nameserver of /etc/resolv.conf). Call it before the process locks
// itself down (reading the addresses needs a netlink socket). A config it
// refuses is a *ConfigError.
func NewNAT(c NATConfig) (*NAT, error) {
	if c.MaxRelays <= 0 { // spec.Spec.Validate refused negative ones
		c.MaxRelays = DefaultMaxRelays
	}
	var ports []uint16
	for _, p := range c.HostPorts {
		if err := egress.CheckHostPort(p); err != nil {
			return nil, &ConfigError{fmt.Errorf("allow_host_ports: %v", err)}
		}
		ports = append(ports, uint16(p))
	}
	own, err := egress.HostAddrs()
	if err != nil {
		// Without them the guest could reach the host's services on its
		// own addresses: refuse rather than guess.
		return nil, fmt.Errorf("nat: read the host's addresses for the egress policy: %w", err)
	}
	dns := os.Getenv(DNSEnv)
	if dns != "" {
		if _, err := netip.ParseAddrPort(dns); err != nil {
			return nil, &ConfigError{fmt.Errorf("%s=%q: want IP:PORT, e.g. 127.0.0.1:5353 or [2001:db8::53]:53", DNSEnv, dns)}
		}
	} else if ns := FirstNameserver("/etc/resolv.conf"); ns != "" {
		dns = net.JoinHostPort(ns, "53")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nat: socketpair: %w", err)
	}
	return &NAT{
		conn: os.NewFile(uintptr(fds[0]), "nat"), Child: os.NewFile(uintptr(fds[1]), "nat-child"),
		dns: dns, policy: egress.New(c.Rules, ports, own), maxRelays: c.MaxRelays,
		fd: -1, open: map[io.Closer]struct{}{},
	}, nil
}

// FirstNameserver returns the first nameserver line's address of a
// resolv.conf, or "".
func FirstNameserver(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if ip := net.ParseIP(strings.SplitN(fields[1], "%", 2)[0]); ip != nil {
				return ip.String()
			}
		}
	}
	return ""
}

// serve receives the packet socket and runs the netstack on it until
// Close. Call it once the supervisor has started. It returns once the
// stack runs (or failed to start; errNATNoSocket if the supervisor exited
// without sending the socket).
func (n *NAT) serve() error {
	// The supervisor holds its own copy now: without ours, its exit ends
	// the receive below.
	n.Child.Close()
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(n.conn.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return fmt.Errorf("nat: receive the packet socket: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return errNATNoSocket
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return errNATNoSocket
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fd = fds[0]
	if n.closed {
		unix.Close(n.fd)
		return nil
	}
	st, err := n.newStack(n.fd)
	if err != nil {
		unix.Close(n.fd)
		return err
	}
	n.st = st
	return nil
}

// ServeLink runs the netstack on the socket pair itself (IsolationSeccompOnly:
// the sandbox has the other end as its eth0 link; no packet socket, no
// veth). Call it once the sandbox holds that end.
func (n *NAT) ServeLink() error {
	n.Child.Close()
	fd, err := unix.Dup(int(n.conn.Fd()))
	if err != nil {
		return fmt.Errorf("nat: %w", err)
	}
	unix.CloseOnExec(fd)
	for _, opt := range []int{unix.SO_SNDBUF, unix.SO_RCVBUF} {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, natLinkBuf)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fd = fd
	if n.closed {
		unix.Close(fd)
		return nil
	}
	st, err := n.newStack(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	n.st = st
	return nil
}

// natLinkBuf is SO_SNDBUF and SO_RCVBUF of the host side's end of a
// seccomp-only episode's link: room for a few dozen full frames.
const natLinkBuf = 4 << 20

// ServeOrReport is serve, reporting an error to w. A supervisor that
// failed before sending the socket has reported why itself.
func (n *NAT) ServeOrReport(w io.Writer) {
	if err := n.serve(); err != nil && !errors.Is(err, errNATNoSocket) {
		fmt.Fprintf(w, "rungv: --network nat: %v\n", err)
	}
}

// errNATNoSocket: the supervisor closed its end without sending.
var errNATNoSocket = errors.New("nat: the supervisor sent no packet socket")

// newStack builds the host-side netstack on a packet socket fd.
func (n *NAT) newStack(fd int) (*stack.Stack, error) {
	ep, err := fdbased.New(&fdbased.Options{
		FDs:                []int{fd},
		MTU:                MTU,
		EthernetHeader:     true,
		Address:            tcpip.LinkAddress(HostMAC),
		PacketDispatchMode: fdbased.RecvMMsg,
	})
	if err != nil {
		return nil, fmt.Errorf("nat: link endpoint: %w", err)
	}
	st := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	fail := func(what string, e tcpip.Error) (*stack.Stack, error) {
		st.Close()
		st.Wait()
		return nil, fmt.Errorf("nat: %s: %s", what, e)
	}
	const nic = 1
	if e := st.CreateNICWithOptions(nic, ep, stack.NICOptions{Name: natHostIf}); e != nil {
		return fail("create NIC", e)
	}
	// Promiscuous: every destination is accepted (then dialed from the
	// host); spoofing: answers leave with that destination as source.
	if e := st.SetPromiscuousMode(nic, true); e != nil {
		return fail("promiscuous mode", e)
	}
	if e := st.SetSpoofing(nic, true); e != nil {
		return fail("spoofing", e)
	}
	for _, ip := range []net.IP{GatewayIP, DNSIP} {
		pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4Slice(ip), PrefixLen: 24}}
		if e := st.AddProtocolAddress(nic, pa, stack.AddressProperties{}); e != nil {
			return fail("address", e)
		}
	}
	// The guest's own network is on the link; any other destination
	// (what the host side answers to, spoofing the server's address) is
	// routed through the guest: addresses behind it are networks it
	// forwards to, as dockerd's bridges (their containers reach out with
	// their own source addresses: no MASQUERADE in the Sentry).
	guestNet, _ := tcpip.NewSubnet(tcpip.AddrFrom4Slice(GuestIP.Mask(net.CIDRMask(24, 32))), tcpip.MaskFromBytes(net.CIDRMask(24, 32)))
	st.SetRouteTable([]tcpip.Route{
		{Destination: guestNet, NIC: nic},
		{Destination: header4Any(), Gateway: tcpip.AddrFrom4Slice(GuestIP), NIC: nic},
	})
	sack := tcpip.TCPSACKEnabled(true)
	_ = st.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4096, Default: natTCPBuf, Max: natTCPBuf}
	_ = st.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4096, Default: natTCPBuf, Max: natTCPBuf}
	_ = st.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)

	tf := tcp.NewForwarder(st, 0, natMaxInFlight, n.forwardTCP)
	st.SetTransportProtocolHandler(tcp.ProtocolNumber, tf.HandlePacket)
	uf := udp.NewForwarder(st, n.forwardUDP)
	st.SetTransportProtocolHandler(udp.ProtocolNumber, uf.HandlePacket)
	return st, nil
}

// header4Any is 0.0.0.0/0.
func header4Any() tcpip.Subnet {
	s, _ := tcpip.NewSubnet(tcpip.AddrFrom4([4]byte{}), tcpip.MaskFromBytes([]byte{0, 0, 0, 0}))
	return s
}

// natTarget maps a guest destination to the host address to dial, as
// policy decides: 10.0.2.2 is the host's loopback on allowed host ports,
// 10.0.2.3:53 the resolver dns (IP:port, "" for none), the rest of
// 10.0.2.0/24 is refused, and any other address is itself if the policy
// allows it. The decision says why.
func natTarget(policy *egress.Policy, dst netip.Addr, port uint16, dns string) (netip.AddrPort, egress.Decision) {
	dst = dst.Unmap()
	switch {
	case dst == natGatewayAddr:
		return policy.HostPort(port)
	case dst == natDNSAddr:
		r, err := netip.ParseAddrPort(dns)
		if port != 53 || err != nil {
			return netip.AddrPort{}, egress.Decision{Rule: -1, Reason: "10.0.2.3 answers DNS on port 53 only"}
		}
		return r, policy.Resolver(r)
	case natGuestNet.Contains(dst):
		return netip.AddrPort{}, egress.Decision{Rule: -1, Reason: "the guest's own network (10.0.2.0/24)"}
	}
	t := netip.AddrPortFrom(dst, port)
	return t, policy.Decide(t)
}

// The guest's view as netip values.
var (
	natGatewayAddr = netip.AddrFrom4([4]byte(GatewayIP))
	natDNSAddr     = netip.AddrFrom4([4]byte(DNSIP))
	natGuestNet    = netip.PrefixFrom(netip.AddrFrom4([4]byte(GuestIP)), 24).Masked()
)

// target decides a guest destination (id's local end): the host address
// to dial, or ok false.
func (n *NAT) target(id stack.TransportEndpointID) (netip.AddrPort, bool) {
	dst, ok := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	if !ok {
		return netip.AddrPort{}, false
	}
	t, d := natTarget(n.policy, dst, id.LocalPort, n.dns)
	if !d.Allow {
		return netip.AddrPort{}, false
	}
	// Allowed by no rule (the outside world): make sure it is not one
	// of the host's own addresses added since the start.
	if d.World && isLocalAddr(t.Addr()) {
		return netip.AddrPort{}, false
	}
	return t, true
}

// isLocalAddr tells a destination the kernel delivers to this host (or
// one it cannot route: refused as well). It asks the kernel's routing
// with a connected UDP socket, which sends nothing: the source it picks
// for a local destination is the destination itself (or, for the
// loopback range, 127.0.0.1).
func isLocalAddr(a netip.Addr) bool {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 9)))
	if err != nil {
		return true
	}
	defer c.Close()
	src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	return src == a || src.IsLoopback()
}

// natDialer dials the host sockets of relays, with fixed buffers.
var natDialer = &net.Dialer{Timeout: natDialTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, natSockBuf); e != nil && serr == nil {
				serr = e
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}}

// reserve takes one of the maxRelays slots for a relay about to open a
// host socket; false once closed or full. The returned func gives it back.
func (n *NAT) reserve() (func(), bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.relays >= n.maxRelays {
		return nil, false
	}
	n.relays++
	return func() {
		n.mu.Lock()
		n.relays--
		n.mu.Unlock()
	}, true
}

// track registers a relay's host socket for Close; false (and c closed)
// once closed. The returned func unregisters it.
func (n *NAT) track(c io.Closer) (func(), bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.Close()
		return nil, false
	}
	n.open[c] = struct{}{}
	return func() {
		n.mu.Lock()
		delete(n.open, c)
		n.mu.Unlock()
	}, true
}

// forwardTCP connects to the destination from the host, then completes
// the guest's handshake (a refused or failed connect resets it).
func (n *NAT) forwardTCP(r *tcp.ForwarderRequest) {
	target, ok := n.target(r.ID())
	if !ok {
		r.Complete(true)
		return
	}
	release, ok := n.reserve()
	if !ok {
		r.Complete(true)
		return
	}
	go func() {
		defer release()
		hc, err := natDialer.Dial("tcp", target.String())
		if err != nil {
			r.Complete(true)
			return
		}
		untrack, ok := n.track(hc)
		if !ok {
			r.Complete(true)
			return
		}
		defer untrack()
		var wq waiter.Queue
		ep, terr := r.CreateEndpoint(&wq)
		if terr != nil {
			r.Complete(true)
			hc.Close()
			return
		}
		r.Complete(false)
		gc := gonet.NewTCPConn(&wq, ep)
		splice(gc, hc.(*net.TCPConn))
	}()
}

// halfCloser is a connection whose write side closes alone.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// splice copies both ways, passing half-closes on, and closes both. It
// copies through buffers of its own (copyPlain), never by splice(2): Go
// splices between a published port's TCP client and its unix pair through
// a pipe it sizes to 1 MiB, and a guest that takes nothing (or slowly)
// left up to that much of what each client sent in the host's kernel,
// publishMaxConns clients a port (TestPublishHostileGuest: 135 MiB for
// 278 clients of 1 MiB each).
func splice(a, b halfCloser) {
	done := make(chan struct{})
	go func() {
		copyPlain(b, a)
		_ = b.CloseWrite()
		close(done)
	}()
	copyPlain(a, b)
	_ = a.CloseWrite()
	<-done
	a.Close()
	b.Close()
}

// forwardUDP relays one UDP flow (guest address and port to destination)
// through a connected host socket until it idles for natUDPIdle
// (natDNSIdle for DNS).
func (n *NAT) forwardUDP(r *udp.ForwarderRequest) bool {
	id := r.ID()
	target, ok := n.target(id)
	if !ok {
		return false
	}
	idle := natUDPIdle
	if id.LocalAddress == tcpip.AddrFrom4Slice(DNSIP) {
		idle = natDNSIdle
	}
	release, ok := n.reserve()
	if !ok {
		return false
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		release()
		return false
	}
	gc := gonet.NewUDPConn(&wq, ep)
	go func() {
		defer release()
		defer gc.Close()
		hc, err := natDialer.Dial("udp", target.String())
		if err != nil {
			return
		}
		untrack, ok := n.track(hc)
		if !ok {
			return
		}
		defer untrack()
		defer hc.Close()
		var last atomic.Int64 // UnixNano of the last datagram either way
		last.Store(time.Now().UnixNano())
		relay := func(dst, src net.Conn) {
			buf := make([]byte, 65536)
			for {
				_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(idle))
				m, err := src.Read(buf)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < idle {
					continue // the other direction is busy
				}
				if err != nil {
					// Idle or closed: end the flow both ways.
					gc.Close()
					hc.Close()
					return
				}
				last.Store(time.Now().UnixNano())
				_, _ = dst.Write(buf[:m])
			}
		}
		go relay(hc, gc)
		relay(gc, hc)
	}()
	return true
}

// Close stops the netstack and closes the relays' host sockets. Closing
// the packet socket waits for an RCU grace period in the kernel (~10 ms).
func (n *NAT) Close() {
	n.mu.Lock()
	n.closed = true
	st := n.st
	for c := range n.open {
		c.Close()
	}
	n.mu.Unlock()
	_ = unix.Shutdown(int(n.conn.Fd()), unix.SHUT_RDWR) // wakes serve's receive
	n.conn.Close()
	n.Child.Close()
	if st != nil {
		st.Close()
		st.Wait()
		unix.Close(n.fd)
	}
}
