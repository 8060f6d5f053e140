package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Errors.
var (
	// ErrBadRule reports a rule that does not parse.
	ErrBadRule = errors.New("bad egress rule")
	// ErrBadHostPort reports a host port out of range.
	ErrBadHostPort = errors.New("bad host port")
)

// Action is what a Rule does with what it covers.
type Action uint8

// Actions.
const (
	Allow Action = iota + 1
	Deny
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// PortRange is the ports Lo through Hi, both included (1 ≤ Lo ≤ Hi).
type PortRange struct{ Lo, Hi uint16 }

// Rule allows or denies the destinations in Prefix on Ports (every port
// when Ports is empty).
type Rule struct {
	Action Action
	// Prefix is masked (no host bits); an IPv4-mapped IPv6 prefix is
	// stored as the IPv4 prefix it means.
	Prefix netip.Prefix
	Ports  []PortRange
}

// ruleHelp is the fix every parse error carries.
const ruleHelp = "want allow=CIDR[:PORTS] or deny=CIDR[:PORTS], PORTS like 443, 80,443 or 8000-9000, " +
	"e.g. allow=192.0.2.0/24:443, deny=203.0.113.7 or allow=[2001:db8::]/32:80,443"

func badRule(s, format string, a ...any) error {
	return fmt.Errorf("%w %q: %s; %s", ErrBadRule, s, fmt.Sprintf(format, a...), ruleHelp)
}

// ParseRule parses allow=CIDR[:PORTS] or deny=CIDR[:PORTS]. CIDR is an
// IPv4 or IPv6 prefix without host bits, or a bare address (a /32 or
// /128); an IPv6 address or prefix followed by ports is written in
// brackets ([2001:db8::1]:443, [2001:db8::]/32:443). Host names are not
// accepted: the policy decides on the addresses the guest dials.
func ParseRule(s string) (Rule, error) {
	var r Rule
	act, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	switch strings.ToLower(strings.TrimSpace(act)) {
	case "allow":
		r.Action = Allow
	case "deny":
		r.Action = Deny
	default:
		return r, badRule(s, "the rule must start with allow= or deny=")
	}
	if !ok || v == "" {
		return r, badRule(s, "no address after %s=", act)
	}
	addr, bits, ports, err := splitRule(v)
	if err != nil {
		return r, badRule(s, "%v", err)
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" {
		return r, badRule(s, "%q is not an IP address (host names and zones are not accepted)", addr)
	}
	n := ip.BitLen()
	if bits != "" {
		if n, err = strconv.Atoi(bits); err != nil || n < 0 || n > ip.BitLen() || bits[0] == '+' {
			return r, badRule(s, "prefix length /%s is not in 0..%d", bits, ip.BitLen())
		}
	}
	p := netip.PrefixFrom(ip, n)
	if m := p.Masked(); m != p {
		return r, badRule(s, "%s has bits set past /%d; did you mean %s?", p, n, m)
	}
	r.Prefix = unmapPrefix(p)
	if ports != "" {
		if r.Ports, err = parsePorts(ports); err != nil {
			return r, badRule(s, "%v", err)
		}
	}
	return r, nil
}

// splitRule splits a rule's value into address, prefix length ("" for a
// bare address) and ports ("" for every port).
func splitRule(v string) (addr, bits, ports string, err error) {
	if strings.HasPrefix(v, "[") {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return "", "", "", errors.New("no ] after [")
		}
		addr, rest := v[1:end], v[end+1:]
		if a, b, ok := strings.Cut(addr, "/"); ok { // [2001:db8::/32]:443
			addr, bits = a, b
		} else if strings.HasPrefix(rest, "/") { // [2001:db8::]/32:443
			var hasPorts bool
			bits, rest, hasPorts = strings.Cut(rest[1:], ":")
			if bits == "" {
				return "", "", "", errors.New("no prefix length after /")
			}
			if hasPorts {
				rest = ":" + rest
			}
		}
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", "", "", fmt.Errorf("%q after ] is not :PORTS", rest)
			}
			if ports = rest[1:]; ports == "" {
				return "", "", "", errors.New("no ports after :")
			}
		}
		if strings.HasSuffix(v[:end], "/") {
			return "", "", "", errors.New("no prefix length after /")
		}
		return addr, bits, ports, nil
	}
	if a, rest, ok := strings.Cut(v, "/"); ok { // 10.0.0.0/8:443, 2001:db8::/32:443
		bits, ports, ok = strings.Cut(rest, ":")
		if bits == "" {
			return "", "", "", errors.New("no prefix length after /")
		}
		if ok && ports == "" {
			return "", "", "", errors.New("no ports after :")
		}
		return a, bits, ports, nil
	}
	if _, err := netip.ParseAddr(v); err == nil || strings.Count(v, ":") != 1 {
		return v, "", "", nil // a bare address (IPv6 ports need brackets)
	}
	addr, ports, _ = strings.Cut(v, ":") // 192.0.2.7:443
	if ports == "" {
		return "", "", "", errors.New("no ports after :")
	}
	return addr, "", ports, nil
}

// parsePorts parses 80, 80,443, 8000-9000 and lists of them.
func parsePorts(s string) ([]PortRange, error) {
	var rs []PortRange
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("port range %s ends before it starts", f)
			}
		}
		rs = append(rs, PortRange{a, b})
	}
	return rs, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q is not a number in 1..65535", s)
	}
	return uint16(n), nil
}

// CheckHostPort validates a host port (--allow-host-port).
func CheckHostPort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("%w %d: not in 1..65535 (e.g. --allow-host-port 5000 lets the guest reach the host's 127.0.0.1:5000 as 10.0.2.2:5000)", ErrBadHostPort, p)
	}
	return nil
}

// unmapPrefix turns ::ffff:a.b.c.d/N (N ≥ 96) into a.b.c.d/(N-96).
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Covers tells whether r's prefix and ports cover dst (unmapped).
func (r Rule) Covers(dst netip.AddrPort) bool {
	if !r.Prefix.Contains(dst.Addr().Unmap()) {
		return false
	}
	if len(r.Ports) == 0 {
		return true
	}
	for _, pr := range r.Ports {
		if dst.Port() >= pr.Lo && dst.Port() <= pr.Hi {
			return true
		}
	}
	return false
}

// String is the rule as ParseRule reads it.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Action.String())
	b.WriteByte('=')
	a, bits := r.Prefix.Addr(), r.Prefix.Bits()
	full := bits == a.BitLen()
	switch {
	case a.Is6() && len(r.Ports) > 0:
		b.WriteString("[" + a.String() + "]")
		if !full {
			b.WriteString("/" + strconv.Itoa(bits))
		}
	case full:
		b.WriteString(a.String())
	default:
		b.WriteString(r.Prefix.String())
	}
	for i, pr := range r.Ports {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(pr.Lo)))
		if pr.Hi != pr.Lo {
			b.WriteString("-" + strconv.Itoa(int(pr.Hi)))
		}
	}
	return b.String()
}
