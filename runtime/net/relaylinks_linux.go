package episodenet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bridges across a restore.
//
// gVisor saves the guest's network stack without its NICs (tcpip.Stack's
// nics are "nosave"): a restored Sentry has loopback and the links the
// host side configures again, and nothing the guest made for itself. A
// dockerd restored from a checkpoint has lost docker0, and `docker run`
// on the default network fails with "could not find bridge docker0".
// So the relay (the guest's init when ports are published, and a process
// whose memory the checkpoint holds) keeps a record of the guest's
// bridges: the host side asks it to take one just before the save
// (LinksSave), and after a restore to make every recorded bridge
// that is missing again, with its MAC, MTU, addresses and up state
// (LinksRestore). dockerd finds its bridge by name, so its
// containers attach to the new one.
//
// The words travel over the first published port's SEQPACKET pair as a
// message without descriptors (a client connection always carries one).
// The relay is the guest's own code: a guest that answers nothing, answers
// junk or stops reading only delays its own checkpoint, by at most
// relayWordSend plus the caller's wait (TestRelayWordHostileGuest).

// Relay control words and the relay's answer.
const (
	LinksSave    = "gvx:links-save"
	LinksRestore = "gvx:links-restore"
	linksOK      = "gvx:ok"
)

// bridgeRecord is one guest bridge as the relay recorded it.
type bridgeRecord struct {
	name  string
	mac   []byte
	mtu   uint32
	up    bool
	addrs []bridgeAddr
}

// bridgeAddr is one address of a bridge.
type bridgeAddr struct {
	family uint8
	prefix uint8
	ip     []byte
}

var relayBridges struct {
	sync.Mutex
	list []bridgeRecord
}

// relayControl handles a control word from the host side and returns the
// answer to send back ("" for none).
func relayControl(word string) string {
	relayBridges.Lock()
	defer relayBridges.Unlock()
	switch word {
	case LinksSave:
		list, err := guestBridges()
		if err == nil {
			relayBridges.list = list
		}
		return linksOK
	case LinksRestore:
		for _, b := range relayBridges.list {
			if _, err := net.InterfaceByName(b.name); err == nil {
				continue // it survived (or was made again)
			}
			_ = makeBridge(b)
		}
	}
	return ""
}

// guestBridges lists the bridges of the guest's network stack.
func guestBridges() ([]bridgeRecord, error) {
	links, err := syscall.NetlinkRIB(unix.RTM_GETLINK, unix.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(links)
	if err != nil {
		return nil, err
	}
	byIndex := map[int32]*bridgeRecord{}
	var order []int32
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		info := (*unix.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			continue
		}
		b := bridgeRecord{up: info.Flags&unix.IFF_UP != 0}
		bridge := false
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_IFNAME:
				b.name = string(trimNUL(a.Value))
			case unix.IFLA_ADDRESS:
				b.mac = append([]byte(nil), a.Value...)
			case unix.IFLA_MTU:
				if len(a.Value) >= 4 {
					b.mtu = binary.NativeEndian.Uint32(a.Value)
				}
			case unix.IFLA_LINKINFO:
				bridge = linkKind(a.Value) == "bridge"
			}
		}
		if bridge && b.name != "" {
			byIndex[info.Index] = &b
			order = append(order, info.Index)
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	addrs, err := syscall.NetlinkRIB(unix.RTM_GETADDR, unix.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	if msgs, err = syscall.ParseNetlinkMessage(addrs); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < unix.SizeofIfAddrmsg {
			continue
		}
		am := (*unix.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
		b := byIndex[int32(am.Index)]
		if b == nil {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.Attr.Type == unix.IFA_LOCAL || a.Attr.Type == unix.IFA_ADDRESS && am.Family == unix.AF_INET6 {
				b.addrs = append(b.addrs, bridgeAddr{family: am.Family, prefix: am.Prefixlen, ip: append([]byte(nil), a.Value...)})
				break
			}
		}
	}
	list := make([]bridgeRecord, 0, len(order))
	for _, i := range order {
		list = append(list, *byIndex[i])
	}
	return list, nil
}

// linkKind is IFLA_INFO_KIND inside an IFLA_LINKINFO value.
func linkKind(v []byte) string {
	for len(v) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(v))
		t := binary.NativeEndian.Uint16(v[2:])
		if l < unix.SizeofRtAttr || l > len(v) {
			return ""
		}
		if t == unix.IFLA_INFO_KIND {
			return string(trimNUL(v[unix.SizeofRtAttr:l]))
		}
		if rtaAlign(l) >= len(v) {
			return ""
		}
		v = v[rtaAlign(l):]
	}
	return ""
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

func rtaAlign(n int) int { return (n + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1) }

// makeBridge creates b again: the link, its addresses, then up.
func makeBridge(b bridgeRecord) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	var info unix.IfInfomsg
	attrs := rtAttr(unix.IFLA_IFNAME, append([]byte(b.name), 0))
	if len(b.mac) > 0 {
		attrs = append(attrs, rtAttr(unix.IFLA_ADDRESS, b.mac)...)
	}
	if b.mtu > 0 {
		attrs = append(attrs, rtAttr(unix.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, b.mtu))...)
	}
	attrs = append(attrs, rtAttr(unix.IFLA_LINKINFO, rtAttr(unix.IFLA_INFO_KIND, []byte("bridge")))...)
	if err := nlRequest(fd, unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, structBytes(&info), attrs); err != nil {
		return fmt.Errorf("create bridge %s: %w", b.name, err)
	}
	ifc, err := net.InterfaceByName(b.name)
	if err != nil {
		return err
	}
	for _, a := range b.addrs {
		am := unix.IfAddrmsg{Family: a.family, Prefixlen: a.prefix, Index: uint32(ifc.Index)}
		at := append(rtAttr(unix.IFA_LOCAL, a.ip), rtAttr(unix.IFA_ADDRESS, a.ip)...)
		if err := nlRequest(fd, unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, structBytes(&am), at); err != nil {
			return fmt.Errorf("address %s on %s: %w", net.IP(a.ip), b.name, err)
		}
	}
	if b.up {
		up := unix.IfInfomsg{Index: int32(ifc.Index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
		if err := nlRequest(fd, unix.RTM_NEWLINK, 0, structBytes(&up), nil); err != nil {
			return fmt.Errorf("set %s up: %w", b.name, err)
		}
	}
	return nil
}

// rtAttr encodes one route attribute, padded.
func rtAttr(typ uint16, v []byte) []byte {
	l := unix.SizeofRtAttr + len(v)
	out := make([]byte, rtaAlign(l))
	binary.NativeEndian.PutUint16(out, uint16(l))
	binary.NativeEndian.PutUint16(out[2:], typ)
	copy(out[unix.SizeofRtAttr:], v)
	return out
}

func structBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// nlRequest sends one request with an ACK and returns its error.
func nlRequest(fd int, typ uint16, flags int, head, attrs []byte) error {
	n := unix.SizeofNlMsghdr + len(head) + len(attrs)
	msg := make([]byte, unix.SizeofNlMsghdr, n)
	h := (*unix.NlMsghdr)(unsafe.Pointer(&msg[0]))
	*h = unix.NlMsghdr{Len: uint32(n), Type: typ, Flags: uint16(unix.NLM_F_REQUEST | unix.NLM_F_ACK | flags), Seq: 1}
	msg = append(append(msg, head...), attrs...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:k])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return unix.Errno(-e)
				}
				return nil
			}
		}
		if len(msgs) == 0 {
			return errors.New("netlink: empty answer")
		}
	}
}
