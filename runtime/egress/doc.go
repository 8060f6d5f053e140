// Package egress is the network egress policy of a --network nat episode:
// which destinations the guest's TCP and UDP may reach through the host
// side's sockets. It is plain data and decisions (no gVisor, no sockets),
// shared by the runtime (which enforces it), the rungv CLI and the Go SDK
// (which parse and validate it).
//
// # Trust boundary
//
// The guest is hostile and knows this code. Every destination it names is
// decided here before the host side opens a socket for it; the host side
// dials IP literals only, never names, so what is decided is what is
// dialed.
//
// # The default: the outside world only
//
// With no rule, the guest reaches public addresses and nothing of the
// host or its networks: not the host's loopback (127.0.0.0/8, ::1), not
// link-local addresses (169.254.0.0/16 with the cloud metadata service
// 169.254.169.254, fe80::/10), not private ranges (RFC 1918 10/8,
// 172.16/12, 192.168/16; CGNAT 100.64.0.0/10; ULA fc00::/7; site-local
// fec0::/10), not cloud platform addresses outside those ranges
// (168.63.129.16), and not the host's own interface addresses (with their
// directed-broadcast addresses), read when the episode starts. Addresses
// that are no destination (0.0.0.0/8, ::, multicast, 240.0.0.0/4 and the
// broadcast address) are refused whatever the rules say: Linux delivers a
// connect to 0.0.0.0 to the host's loopback.
//
// # Rules and their precedence
//
// A Rule is allow=CIDR[:PORTS] or deny=CIDR[:PORTS] (ParseRule). For a
// destination address and port, first match in this order wins:
//
//  1. not a destination (see above): refused;
//  2. a deny rule that covers it: refused;
//  3. an allow rule that covers it: allowed (this is how a caller opens a
//     private network, a link-local service or the host's own address);
//  4. the default deny list (loopback, link-local, private ranges, the
//     host's own addresses): refused;
//  5. anything else (the outside world): allowed.
//
// Deny rules always win, so a deny can never be undone by a later allow;
// to open one host of a private range, write only the allow (the default
// already denies the rest of the range).
//
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are the IPv4 address for
// every decision and in rules (::ffff:a.b.c.d/N with N ≥ 96 is the IPv4
// rule a.b.c.d/(N-96)); addresses in the NAT64 well-known prefix
// 64:ff9b::/96 are also refused when the IPv4 address they embed is.
// Other IPv6 rules never match IPv4 destinations.
//
// # The host's loopback and DNS
//
// The guest's gateway (10.0.2.2 in slirp's layout) reaches the host's
// 127.0.0.1 on the host ports given to New only (Policy.HostPort), and a
// deny rule covering 127.0.0.1:PORT still wins. The guest's DNS address
// (10.0.2.3:53) reaches only the configured resolver (Policy.Resolver),
// which is the one exception to the default deny list: a resolver on the
// host's loopback (systemd-resolved's 127.0.0.53) or a private network is
// reached, for DNS through that address only; a deny rule still wins.
package egress
