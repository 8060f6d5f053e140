package runtime

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
	"z.gfire.dev/gvx/spec"
)

// TestLockdownNAT runs LockdownNAT in a child: AF_INET/AF_INET6 stream and
// datagram sockets, connect and socketpair (-p TCP splices through one; it
// reaches nothing) work; raw sockets, every other family, bind and exec
// are refused.
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
	if fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0); err != nil {
		fail("socketpair: " + err.Error())
	} else {
		unix.Close(fds[0])
		unix.Close(fds[1])
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

// htons is v in network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestNATBadOption: a GVX_NAT_DNS the NAT (runtime/net) refuses reaches
// the caller as its own bad option, ErrBadOption, with the variable and
// the fix named; a good one makes the NAT.
func TestNATBadOption(t *testing.T) {
	s := &spec.Spec{Version: spec.Version, Image: "oci:/img", Network: spec.NetworkNAT, Isolation: spec.IsolationNamespaces}
	p, err := newPlan(s, Host{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GVX_NAT_DNS", "nowhere")
	_, err = newNAT(p)
	want := `rungv: bad option: GVX_NAT_DNS="nowhere": want IP:PORT, e.g. 127.0.0.1:5353 or [2001:db8::53]:53`
	if !errors.Is(err, ErrBadOption) || err == nil || err.Error() != want {
		t.Fatalf("newNAT: %v, want %q (ErrBadOption)", err, want)
	}
	t.Setenv("GVX_NAT_DNS", "127.0.0.1:5353")
	nat, err := newNAT(p)
	if err != nil {
		t.Fatal(err)
	}
	nat.Close()
}
