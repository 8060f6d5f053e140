package egress

import (
	"net"
	"net/netip"
	"strconv"
)

// Decision is a verdict and why.
type Decision struct {
	Allow bool
	// Rule is the index of the rule that decided, -1 when no rule did.
	Rule int
	// Reason names what decided: "deny rule deny=…", "allow rule
	// allow=…", "loopback (127.0.0.0/8)", "the host's own address",
	// "not a destination (multicast)", "the outside world"…
	Reason string
	// World is set for a destination allowed as the outside world: no
	// rule, no built-in range and no known host address covers it.
	World bool
}

// namedPrefix is one range of a built-in list.
type namedPrefix struct {
	p    netip.Prefix
	name string
}

func np(s, name string) namedPrefix { return namedPrefix{netip.MustParsePrefix(s), name} }

// notDestinations are never dialed, whatever the rules say.
var notDestinations = []namedPrefix{
	np("0.0.0.0/8", "not a destination (0.0.0.0/8: \"this host\")"),
	np("224.0.0.0/4", "not a destination (multicast)"),
	np("240.0.0.0/4", "not a destination (reserved, broadcast)"),
	np("::/128", "not a destination (unspecified)"),
	np("ff00::/8", "not a destination (multicast)"),
}

// defaultDeny is what the guest never reaches unless an allow rule says
// so (besides the host's own addresses).
var defaultDeny = []namedPrefix{
	np("127.0.0.0/8", "loopback (127.0.0.0/8)"),
	np("169.254.0.0/16", "link-local (169.254.0.0/16, cloud metadata)"),
	np("10.0.0.0/8", "private (10.0.0.0/8)"),
	np("172.16.0.0/12", "private (172.16.0.0/12)"),
	np("192.168.0.0/16", "private (192.168.0.0/16)"),
	np("100.64.0.0/10", "carrier-grade NAT (100.64.0.0/10)"),
	np("168.63.129.16/32", "cloud platform address (168.63.129.16)"),
	np("::1/128", "loopback (::1)"),
	np("fe80::/10", "link-local (fe80::/10)"),
	np("fec0::/10", "site-local (fec0::/10)"),
	np("fc00::/7", "unique local (fc00::/7)"),
}

// nat64 is the NAT64 well-known prefix (RFC 6052): its addresses are the
// IPv4 address in their last 32 bits, behind a translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Policy decides the guest's destinations. The zero value (and nil) is
// the default policy with no host addresses known.
type Policy struct {
	rules     []Rule
	hostPorts map[uint16]bool
	own       map[netip.Addr]bool
}

// New makes a policy from rules (in any order: deny rules win), the host
// loopback ports the guest's gateway reaches, and the host's own
// addresses (HostAddrs).
func New(rules []Rule, hostPorts []uint16, own []netip.Addr) *Policy {
	p := &Policy{rules: append([]Rule(nil), rules...), hostPorts: map[uint16]bool{}, own: map[netip.Addr]bool{}}
	for _, hp := range hostPorts {
		p.hostPorts[hp] = true
	}
	for _, a := range own {
		p.own[a.Unmap().WithZone("")] = true
	}
	return p
}

// Decide decides a destination the guest dials directly.
func (p *Policy) Decide(dst netip.AddrPort) Decision {
	a := dst.Addr().Unmap().WithZone("")
	dst = netip.AddrPortFrom(a, dst.Port())
	if !a.IsValid() {
		return Decision{Rule: -1, Reason: "not a destination (no address)"}
	}
	for _, n := range notDestinations {
		if n.p.Contains(a) {
			return Decision{Rule: -1, Reason: n.name}
		}
	}
	if d, ok := p.explicit(dst); ok {
		return d
	}
	if reason, ok := p.denied(a); ok {
		return Decision{Rule: -1, Reason: reason}
	}
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if d := p.Decide(netip.AddrPortFrom(v4, dst.Port())); !d.Allow {
			d.Reason = "NAT64 of " + v4.String() + ": " + d.Reason
			return d
		}
	}
	return Decision{Allow: true, Rule: -1, Reason: "the outside world", World: true}
}

// explicit is the decision of the rules alone: a deny rule that covers
// dst, else an allow rule that does.
func (p *Policy) explicit(dst netip.AddrPort) (Decision, bool) {
	if p == nil {
		return Decision{}, false
	}
	allow := -1
	for i, r := range p.rules {
		if !r.Covers(dst) {
			continue
		}
		if r.Action == Deny {
			return Decision{Rule: i, Reason: "deny rule " + r.String()}, true
		}
		if allow < 0 && r.Action == Allow {
			allow = i
		}
	}
	if allow >= 0 {
		return Decision{Allow: true, Rule: allow, Reason: "allow rule " + p.rules[allow].String()}, true
	}
	return Decision{}, false
}

// denied tells an address of the default deny list and which range.
func (p *Policy) denied(a netip.Addr) (string, bool) {
	for _, n := range defaultDeny {
		if n.p.Contains(a) {
			return n.name, true
		}
	}
	if p != nil && p.own[a] {
		return "the host's own address", true
	}
	return "", false
}

// HostPort decides the guest's gateway on port: the host's 127.0.0.1 on
// that port, for allowed host ports only (a deny rule covering
// 127.0.0.1:port still wins). It returns the address to dial.
func (p *Policy) HostPort(port uint16) (netip.AddrPort, Decision) {
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
	if p == nil || !p.hostPorts[port] {
		return dst, Decision{Rule: -1, Reason: "host port " + strconv.Itoa(int(port)) + " is not allowed (--allow-host-port)"}
	}
	if d, ok := p.explicit(dst); ok && !d.Allow {
		return dst, d
	}
	return dst, Decision{Allow: true, Rule: -1, Reason: "allowed host port " + strconv.Itoa(int(port))}
}

// Resolver decides the guest's DNS forward to the configured resolver:
// allowed wherever the resolver is (the one exception to the default
// deny list), unless a deny rule covers it.
func (p *Policy) Resolver(dst netip.AddrPort) Decision {
	dst = netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	if d, ok := p.explicit(dst); ok && !d.Allow {
		return d
	}
	return Decision{Allow: true, Rule: -1, Reason: "the configured resolver"}
}

// HostAddrs returns the addresses of the host's interfaces, with the
// network and directed-broadcast address of each IPv4 subnet on them (a
// UDP socket may send to those). It needs a netlink socket: call it
// before the process locks itself down.
func HostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		out = append(out, ip)
		ones, bits := n.Mask.Size()
		if ip.Is4() && bits == 32 && ones < 31 {
			v := ip.As4()
			m := net.CIDRMask(ones, 32)
			var lo, hi [4]byte
			for i := range v {
				lo[i] = v[i] & m[i]
				hi[i] = v[i] | ^m[i]
			}
			out = append(out, netip.AddrFrom4(lo), netip.AddrFrom4(hi))
		}
	}
	return out, nil
}
