// Package episodenet is an episode's network, both halves of it: the NAT
// (spec.NetworkNAT: slirp's 10.0.2.15/24 for the guest, a gVisor netstack
// in the host process that dials out with the host's own sockets), the
// published ports (spec.Port: endpoints on the host handed to the guest
// one connected descriptor at a time), and the relay, rungv's own code
// running as the guest's init, which connects those descriptors to the
// guest's ports and keeps the guest's bridges across a restore.
//
// Its directory is runtime/net; its name is episodenet so that callers
// still see the standard library's net as net. It links the spec, the
// egress policy (runtime/egress), the image cache (for the relay's image)
// and internal helpers, never the runtime root, its process tree or its
// lockdown: the root starts the processes, locks them down and hands this
// package what the spec and the plan say (NATConfig, the spec's ports).
//
// # Trust boundary
//
// It trusts nothing from the guest. Every frame on the NAT's link, every
// byte on a published stream and every answer of the relay is the guest's
// and may be crafted: a destination is what the egress policy
// (runtime/egress) and natTarget decide, never what the guest asks for;
// what the guest may hold is bounded (NATConfig.MaxRelays host sockets,
// publishMaxConns spliced clients a port, fixed socket buffers), and a
// relay that answers nothing, junk, or stops reading delays the caller by
// a bound (relayWordSend plus its wait), never a hang. The relay itself
// runs inside the guest and is trusted by nobody: it can do no more than
// the guest's own code could.
//
// What the host side may do: create the published endpoints (a unix
// socket of mode 0600 it makes in a private directory and renames into
// place, refusing to replace anything but a stale socket of its own; a TCP
// listener) before the process locks itself down; accept on them and send
// the guest connected stream sockets over a socket pair donated to the
// sandbox; dial with inet stream and datagram sockets the destinations the
// policy allows; and remove the socket files it created, checking each is
// still the file it made (device and inode). In the supervisor, root only
// in the episode's own user namespace, SetupNAT makes the veth pair and
// the packet socket in the episode's network namespace, none in the
// host's. It never gives the guest a host path, a directory or a
// listening socket, and the guest's descriptors carry only the streams
// handed to it.
package episodenet
