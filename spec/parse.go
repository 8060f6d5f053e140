package spec

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"z.gfire.dev/gvx/internal/units"
)

// ParseMount parses docker's --mount syntax into a Mount:
// "type=volume|bind|tmpfs,src=PATH,dst=PATH" then any of ",readonly"
// ",size=32G" ",max-open=N" ",allow-foreign". The type defaults to volume.
// As in docker, the list is CSV: a field holding a comma is quoted
// ("src=/a,b" in double quotes, `"src=/srv/a,b",dst=/d`). Paths are taken as
// given (a caller makes them absolute); Validate checks the rest.
func ParseMount(s string) (Mount, error) {
	bad := func(format string, a ...any) (Mount, error) {
		return Mount{}, fmt.Errorf("%w: --mount %q: %s", ErrInvalid, s, fmt.Sprintf(format, a...))
	}
	if s == "" {
		return bad("empty")
	}
	r := csv.NewReader(strings.NewReader(s))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err == nil {
		if _, err2 := r.Read(); err2 != io.EOF {
			err = errors.New("more than one line")
		}
	}
	if err != nil {
		return bad("not a comma-separated list: %v", err)
	}
	var m Mount
	for _, kv := range fields {
		k, v, hasV := strings.Cut(kv, "=")
		flag := func() (bool, error) {
			switch {
			case !hasV, v == "true", v == "1":
				return true, nil
			case v == "false", v == "0":
				return false, nil
			}
			return false, fmt.Errorf("%s=%s: want true or false", k, v)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "type":
			m.Type = MountType(v)
		case "src", "source":
			m.Source = v
		case "dst", "destination", "target":
			m.Target = v
		case "readonly", "ro":
			if m.ReadOnly, err = flag(); err != nil {
				return bad("%v", err)
			}
		case "allow-foreign":
			if m.AllowForeignOwner, err = flag(); err != nil {
				return bad("%v", err)
			}
		case "max-open":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return bad("max-open= wants a positive number")
			}
			m.MaxOpen = n
		case "durability":
			switch d := Durability(v); d {
			case DurabilityFull, DurabilityEpisode:
				m.Durability = d
			default:
				return bad("durability=%s: want full or episode", v)
			}
		case "size":
			n, err := units.ParseSize(v)
			if err != nil || n <= 0 || n > MaxVolumeSize {
				return bad("size=%s: want more than 0 and at most 1P, like 32G", v)
			}
			m.Size = n
		default:
			return bad("unknown key %q (want type, src, dst, readonly, size, max-open, durability or allow-foreign)", k)
		}
	}
	if m.Type == "" {
		m.Type = MountVolume
	}
	switch m.Type {
	case MountVolume, MountBind:
		if m.Source == "" {
			return bad("missing src=")
		}
	case MountTmpfs:
		if m.Source != "" {
			return bad("tmpfs takes no src=")
		}
	default:
		return bad("type must be volume, bind or tmpfs")
	}
	if m.Size != 0 && m.Type != MountVolume {
		return bad("size= is for volumes")
	}
	if (m.AllowForeignOwner || m.MaxOpen != 0 || m.Durability != "") && m.Type != MountVolume {
		return bad("allow-foreign, max-open= and durability= are for volumes")
	}
	if m.Durability == DurabilityEpisode && m.ReadOnly {
		return bad("durability=episode is for volumes the guest writes: a read-only mount syncs nothing")
	}
	if !strings.HasPrefix(m.Target, "/") {
		return bad("dst= must be an absolute path")
	}
	return m, nil
}

// ParsePublish parses docker's -p syntax into a Port:
// "unix:HOSTSOCK:GUESTPORT", "HOSTPORT:GUESTPORT" or
// "IP:HOSTPORT:GUESTPORT" (IPv6 in brackets; the IP is 127.0.0.1 when
// omitted). HOSTSOCK is taken as given.
func ParsePublish(s string) (Port, error) {
	bad := func(why string) (Port, error) {
		return Port{}, fmt.Errorf("%w: -p %q: %s (want unix:HOSTSOCK:GUESTPORT or [IP:]HOSTPORT:GUESTPORT)", ErrInvalid, s, why)
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return bad("no guest port")
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port <= 0 || port > 65535 {
		return bad("bad guest port")
	}
	host := s[:i]
	if sock, ok := strings.CutPrefix(host, "unix:"); ok {
		if sock == "" {
			return bad("empty socket path")
		}
		return Port{HostSocket: sock, GuestPort: port}, nil
	}
	ip, hp := "127.0.0.1", host
	if j := strings.LastIndexByte(host, ':'); j >= 0 {
		ip, hp = strings.Trim(host[:j], "[]"), host[j+1:]
		if net.ParseIP(ip) == nil {
			return bad("bad host IP")
		}
	}
	hostPort, err := strconv.Atoi(hp)
	if err != nil || hostPort < 0 || hostPort > 65535 {
		return bad("bad host port")
	}
	return Port{HostAddr: net.JoinHostPort(ip, strconv.Itoa(hostPort)), GuestPort: port}, nil
}
