package egress

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	pr := func(lo, hi uint16) PortRange { return PortRange{lo, hi} }
	for _, c := range []struct {
		in     string
		act    Action
		prefix string
		ports  []PortRange
		str    string // String(); "" = in
	}{
		{"allow=192.0.2.0/24", Allow, "192.0.2.0/24", nil, ""},
		{"deny=10.1.0.0/16:443", Deny, "10.1.0.0/16", []PortRange{pr(443, 443)}, ""},
		{"allow=169.254.169.254/32", Allow, "169.254.169.254/32", nil, "allow=169.254.169.254"},
		{"allow=169.254.169.254", Allow, "169.254.169.254/32", nil, ""},
		{"allow=192.0.2.7:80,443", Allow, "192.0.2.7/32", []PortRange{pr(80, 80), pr(443, 443)}, ""},
		{"allow=0.0.0.0/0:8000-9000", Allow, "0.0.0.0/0", []PortRange{pr(8000, 9000)}, ""},
		{"allow=10.0.0.0/8:22,8000-9000,65535", Allow, "10.0.0.0/8", []PortRange{pr(22, 22), pr(8000, 9000), pr(65535, 65535)}, ""},
		{" Deny=203.0.113.7 ", Deny, "203.0.113.7/32", nil, "deny=203.0.113.7"},
		{"allow=2001:db8::/32", Allow, "2001:db8::/32", nil, ""},
		{"allow=2001:db8::/32:443", Allow, "2001:db8::/32", []PortRange{pr(443, 443)}, "allow=[2001:db8::]/32:443"},
		{"allow=[2001:db8::]/32:80,443", Allow, "2001:db8::/32", []PortRange{pr(80, 80), pr(443, 443)}, ""},
		{"allow=[2001:db8::/32]:443", Allow, "2001:db8::/32", []PortRange{pr(443, 443)}, "allow=[2001:db8::]/32:443"},
		{"allow=[2001:db8::1]:443", Allow, "2001:db8::1/128", []PortRange{pr(443, 443)}, ""},
		{"allow=[2001:db8::1]", Allow, "2001:db8::1/128", nil, "allow=2001:db8::1"},
		{"allow=[2001:db8::]/32", Allow, "2001:db8::/32", nil, "allow=2001:db8::/32"},
		{"deny=2001:db8::1", Deny, "2001:db8::1/128", nil, ""},
		{"deny=::/0", Deny, "::/0", nil, ""},
		// IPv4-mapped IPv6 is the IPv4 rule.
		{"allow=::ffff:169.254.169.254", Allow, "169.254.169.254/32", nil, "allow=169.254.169.254"},
		{"deny=::ffff:10.0.0.0/104:80", Deny, "10.0.0.0/8", []PortRange{pr(80, 80)}, "deny=10.0.0.0/8:80"},
		{"allow=[::ffff:127.0.0.1]:5000", Allow, "127.0.0.1/32", []PortRange{pr(5000, 5000)}, "allow=127.0.0.1:5000"},
	} {
		r, err := ParseRule(c.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", c.in, err)
			continue
		}
		if r.Action != c.act || r.Prefix != netip.MustParsePrefix(c.prefix) || !reflect.DeepEqual(r.Ports, c.ports) {
			t.Errorf("ParseRule(%q) = %v %v %v; want %v %v %v", c.in, r.Action, r.Prefix, r.Ports, c.act, c.prefix, c.ports)
		}
		want := c.str
		if want == "" {
			want = strings.TrimSpace(c.in)
		}
		if got := r.String(); got != want {
			t.Errorf("ParseRule(%q).String() = %q, want %q", c.in, got, want)
		}
		// String reads back as the same rule.
		if r2, err := ParseRule(r.String()); err != nil || !reflect.DeepEqual(r2, r) {
			t.Errorf("ParseRule(%q) = %v, %v; want %v", r.String(), r2, err, r)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, c := range []struct{ in, says string }{
		{"", "allow= or deny="},
		{"192.0.2.0/24", "allow= or deny="},
		{"permit=192.0.2.0/24", "allow= or deny="},
		{"allow", "no address"},
		{"allow=", "no address"},
		{"allow=example.com", "not an IP address"},
		{"allow=example.com:443", "not an IP address"},
		{"allow=fe80::1%eth0", "not an IP address"},
		{"allow=10.0.0.0/33", "prefix length /33"},
		{"allow=10.0.0.0/-1", "prefix length"},
		{"allow=10.0.0.0/+8", "prefix length"},
		{"allow=10.0.0.0/", "no prefix length"},
		{"allow=[2001:db8::]/", "no prefix length"},
		{"allow=[2001:db8::/]:80", "no prefix length"},
		{"allow=2001:db8::/129", "prefix length /129"},
		{"allow=10.1.2.3/8", "did you mean 10.0.0.0/8"},
		{"allow=2001:db8::1/32", "did you mean 2001:db8::/32"},
		{"allow=10.0.0.0/8:", "no ports"},
		{"allow=192.0.2.7:", "no ports"},
		{"allow=[2001:db8::1]:", "no ports"},
		{"allow=[2001:db8::1", "no ]"},
		{"allow=[2001:db8::1]443", "is not :PORTS"},
		{"allow=10.0.0.0/8:0", "1..65535"},
		{"allow=10.0.0.0/8:65536", "1..65535"},
		{"allow=10.0.0.0/8:http", "1..65535"},
		{"allow=10.0.0.0/8:80,", "1..65535"},
		{"allow=10.0.0.0/8:9000-8000", "ends before it starts"},
		{"allow=10.0.0.0/8:80-", "1..65535"},
	} {
		_, err := ParseRule(c.in)
		if err == nil {
			t.Errorf("ParseRule(%q) accepted", c.in)
			continue
		}
		if !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "want allow=CIDR[:PORTS]") {
			t.Errorf("ParseRule(%q): %v; want ErrBadRule saying %q and the fix", c.in, err, c.says)
		}
	}
}

func TestCheckHostPort(t *testing.T) {
	for p, ok := range map[int]bool{1: true, 5000: true, 65535: true, 0: false, -1: false, 65536: false} {
		if err := CheckHostPort(p); (err == nil) != ok || (err != nil && !errors.Is(err, ErrBadHostPort)) {
			t.Errorf("CheckHostPort(%d) = %v", p, err)
		}
	}
}

func rules(t *testing.T, ss ...string) []Rule {
	var rs []Rule
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// own is a host address in public space (as on a cloud VM with a public
// interface address), so that only the own-address rule can refuse it.
var own = netip.MustParseAddr("198.51.100.7")

func TestDecideDefault(t *testing.T) {
	p := New(nil, nil, []netip.Addr{own, netip.MustParseAddr("2001:db8:1::5"), netip.MustParseAddr("198.51.100.255")})
	for _, c := range []struct {
		dst    string
		allow  bool
		reason string
	}{
		// The outside world.
		{"192.0.2.7:443", true, "the outside world"},
		{"8.8.8.8:53", true, "the outside world"},
		{"[2001:db8::1]:443", true, "the outside world"},
		{"172.32.0.1:80", true, "the outside world"},          // just past 172.16/12
		{"100.128.0.1:80", true, "the outside world"},         // just past 100.64/10
		{"198.51.100.8:80", true, "the outside world"},        // the host's neighbour
		{"[64:ff9b::c000:207]:80", true, "the outside world"}, // NAT64 of 192.0.2.7
		// The host's loopback, however spelt.
		{"127.0.0.1:22", false, "loopback"},
		{"127.1.2.3:22", false, "loopback"},
		{"127.255.255.255:22", false, "loopback"},
		{"[::1]:22", false, "loopback"},
		{"[::ffff:127.0.0.1]:22", false, "loopback"},
		{"[::ffff:7f00:1]:22", false, "loopback"},
		{"0.0.0.0:22", false, "not a destination"},
		{"0.1.2.3:22", false, "not a destination"},
		{"[::]:22", false, "not a destination"},
		{"[::ffff:0.0.0.0]:22", false, "not a destination"},
		// Link-local and cloud metadata.
		{"169.254.169.254:80", false, "link-local"},
		{"[::ffff:169.254.169.254]:80", false, "link-local"},
		{"[::ffff:a9fe:a9fe]:80", false, "link-local"},
		{"[64:ff9b::a9fe:a9fe]:80", false, "NAT64 of 169.254.169.254: link-local"},
		{"[fe80::1]:80", false, "link-local"},
		{"[fd00:ec2::254]:80", false, "unique local"},
		{"168.63.129.16:80", false, "cloud platform"},
		{"100.100.100.200:80", false, "carrier-grade NAT"},
		// Private ranges.
		{"10.0.0.1:80", false, "private (10.0.0.0/8)"},
		{"10.0.2.2:80", false, "private"},
		{"172.16.0.1:80", false, "private (172.16.0.0/12)"},
		{"172.31.255.255:80", false, "private"},
		{"192.168.1.1:80", false, "private (192.168.0.0/16)"},
		{"[::ffff:192.168.1.1]:80", false, "private"},
		{"100.64.0.1:80", false, "carrier-grade NAT"},
		{"[fc00::1]:80", false, "unique local"},
		{"[fdff::1]:80", false, "unique local"},
		{"[fec0::1]:80", false, "site-local"},
		// The host's own addresses, and its subnet's broadcast.
		{"198.51.100.7:80", false, "the host's own address"},
		{"[::ffff:198.51.100.7]:80", false, "the host's own address"},
		{"198.51.100.255:9", false, "the host's own address"},
		{"[2001:db8:1::5]:80", false, "the host's own address"},
		// Not destinations.
		{"224.0.0.251:5353", false, "multicast"},
		{"239.255.255.250:1900", false, "multicast"},
		{"255.255.255.255:67", false, "broadcast"},
		{"240.0.0.1:80", false, "reserved"},
		{"[ff02::1]:80", false, "multicast"},
	} {
		d := p.Decide(netip.MustParseAddrPort(c.dst))
		if d.Allow != c.allow || !strings.Contains(d.Reason, c.reason) || d.Rule != -1 || d.World != c.allow {
			t.Errorf("Decide(%s) = %+v; want allow %v, reason %q", c.dst, d, c.allow, c.reason)
		}
	}
	var nilPolicy *Policy
	if d := nilPolicy.Decide(netip.MustParseAddrPort("127.0.0.1:80")); d.Allow {
		t.Errorf("a nil policy allowed loopback: %+v", d)
	}
	if d := nilPolicy.Decide(netip.MustParseAddrPort("192.0.2.1:80")); !d.Allow {
		t.Errorf("a nil policy refused the outside world: %+v", d)
	}
}

func TestDecideRules(t *testing.T) {
	p := New(rules(t,
		"allow=169.254.169.254:80",
		"allow=10.0.0.0/8:443",
		"deny=10.9.0.0/16",
		"deny=192.0.2.0/24:25",
		"allow=192.0.2.0/24", // a deny of port 25 still wins
		"allow=198.51.100.7:8080",
		"allow=127.0.0.1:5000",
		"deny=203.0.113.0/24",
		"allow=203.0.113.9", // deny wins, whatever the order
		"allow=0.0.0.0/0:9999",
		"deny=[2001:db8:bad::]/48:443",
	), nil, []netip.Addr{own})
	for _, c := range []struct {
		dst   string
		allow bool
		rule  int // -1: none
	}{
		{"169.254.169.254:80", true, 0},
		{"[::ffff:169.254.169.254]:80", true, 0},
		{"169.254.169.254:81", false, -1}, // ports are exact
		{"169.254.169.253:80", false, -1},
		{"10.1.2.3:443", true, 1},
		{"10.1.2.3:80", false, -1},
		{"10.9.1.1:443", false, 2}, // deny beats the earlier allow
		{"192.0.2.7:25", false, 3},
		{"192.0.2.7:80", true, 4},
		{"198.51.100.7:8080", true, 5}, // the host's own address, opened
		{"198.51.100.7:80", false, -1},
		{"127.0.0.1:5000", true, 6},
		{"127.0.0.2:5000", false, -1},
		{"[::1]:5000", false, -1}, // IPv6 loopback is not 127.0.0.1
		{"203.0.113.9:80", false, 7},
		{"203.0.113.10:80", false, 7},
		{"127.0.0.1:9999", true, 9}, // allow=0.0.0.0/0:PORT opens everything on PORT
		{"0.0.0.0:9999", false, -1}, // but never what is no destination
		{"224.0.0.1:9999", false, -1},
		{"[2001:db8:bad::1]:443", false, 10},
		{"[2001:db8:bad::1]:80", true, -1},
	} {
		d := p.Decide(netip.MustParseAddrPort(c.dst))
		if d.Allow != c.allow || d.Rule != c.rule || d.World != (c.allow && c.rule < 0) {
			t.Errorf("Decide(%s) = %+v; want allow %v by rule %d", c.dst, d, c.allow, c.rule)
		}
	}
	// An IPv6 rule never covers IPv4, an IPv4 rule never IPv6.
	p = New(rules(t, "allow=::/0", "deny=0.0.0.0/0"), nil, nil)
	if d := p.Decide(netip.MustParseAddrPort("127.0.0.1:80")); d.Allow || d.Rule != 1 {
		t.Errorf("allow=::/0 opened IPv4 loopback: %+v", d)
	}
	if d := p.Decide(netip.MustParseAddrPort("[::1]:80")); !d.Allow || d.Rule != 0 {
		t.Errorf("allow=::/0 did not open ::1: %+v", d)
	}
}

func TestHostPort(t *testing.T) {
	p := New(rules(t, "deny=127.0.0.1:6000", "allow=127.0.0.1:7000"), []uint16{5000, 6000}, nil)
	for port, want := range map[uint16]bool{5000: true, 6000: false, 7000: false, 22: false, 5001: false} {
		dst, d := p.HostPort(port)
		if d.Allow != want || d.World || dst != netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port) {
			t.Errorf("HostPort(%d) = %s %+v; want allow %v", port, dst, d, want)
		}
	}
	var nilPolicy *Policy
	if _, d := nilPolicy.HostPort(5000); d.Allow {
		t.Error("a nil policy allowed a host port")
	}
}

func TestResolver(t *testing.T) {
	p := New(rules(t, "deny=10.0.0.53:53"), nil, []netip.Addr{own})
	for dst, want := range map[string]bool{
		"127.0.0.53:53":         true, // systemd-resolved: the one exception
		"[::1]:53":              true,
		"192.168.1.1:53":        true,
		"198.51.100.7:53":       true,
		"[::ffff:10.0.0.53]:53": false, // a deny rule still wins
		"10.0.0.53:53":          false,
	} {
		if d := p.Resolver(netip.MustParseAddrPort(dst)); d.Allow != want {
			t.Errorf("Resolver(%s) = %+v; want allow %v", dst, d, want)
		}
		// The exception is for the resolver, through the DNS address only.
		if d := p.Decide(netip.MustParseAddrPort(dst)); d.Allow {
			t.Errorf("Decide(%s) allowed a resolver dialed directly: %+v", dst, d)
		}
	}
}

func TestHostAddrs(t *testing.T) {
	addrs, err := HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	has := map[netip.Addr]bool{}
	for _, a := range addrs {
		has[a] = true
	}
	if !has[netip.MustParseAddr("127.0.0.1")] {
		t.Errorf("HostAddrs has no 127.0.0.1: %v", addrs)
	}
	// 127.0.0.1/8: its subnet's broadcast address is there too.
	if !has[netip.MustParseAddr("127.255.255.255")] {
		t.Errorf("HostAddrs has no 127.255.255.255: %v", addrs)
	}
	p := New(nil, nil, addrs)
	for _, a := range addrs {
		if d := p.Decide(netip.AddrPortFrom(a, 80)); d.Allow {
			t.Errorf("the host's own address %s is allowed: %+v", a, d)
		}
	}
}

// FuzzParseRule: any string either fails with ErrBadRule or gives a rule
// whose String parses back to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"allow=192.0.2.0/24:443", "deny=[2001:db8::]/32:80,443", "allow=::ffff:10.0.0.0/104", "deny=10.0.0.1:1-65535", "allow=[::1", "x=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if !errors.Is(err, ErrBadRule) {
				t.Fatalf("ParseRule(%q): %v is not ErrBadRule", s, err)
			}
			return
		}
		r2, err := ParseRule(r.String())
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("ParseRule(%q) = %v; its String %q reads back as %v, %v", s, r, r.String(), r2, err)
		}
	})
}
