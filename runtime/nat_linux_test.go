package runtime

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNATTarget(t *testing.T) {
	for _, c := range []struct {
		dst  string
		port uint16
		dns  string
		want string // "" refused
	}{
		{"10.0.2.2", 8080, "", "127.0.0.1:8080"},
		{"10.0.2.3", 53, "192.0.2.53:53", "192.0.2.53:53"},
		{"10.0.2.3", 53, "[2001:db8::1]:53", "[2001:db8::1]:53"},
		{"10.0.2.3", 53, "", ""},
		{"10.0.2.3", 80, "192.0.2.53:53", ""},
		{"10.0.2.15", 80, "", ""},
		{"10.0.2.99", 80, "", ""},
		{"0.0.0.0", 80, "", ""},
		{"255.255.255.255", 67, "", ""},
		{"224.0.0.251", 5353, "", ""},
		{"192.0.2.7", 443, "", "192.0.2.7:443"},
		{"10.0.3.1", 22, "", "10.0.3.1:22"},
	} {
		got, ok := natTarget(net.ParseIP(c.dst).To4(), c.port, c.dns)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("natTarget(%s, %d, %q) = %q, %v; want %q", c.dst, c.port, c.dns, got, ok, c.want)
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
		if got := firstNameserver(p); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
	if got := firstNameserver(filepath.Join(dir, "missing")); got != "" {
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
		if got := isSandboxNetRun(c.args); got != c.want {
			t.Errorf("isSandboxNetRun(%q) = %v", c.args, got)
		}
	}
	if !natEnabled(append([]string{"--root=/r"}, networkRunscFlags(NetworkNAT)...)) || natEnabled(networkRunscFlags(NetworkNone)) {
		t.Error("natEnabled does not tell NAT's runsc flags from none's")
	}
}

func TestAssembleRejectsBadJumps(t *testing.T) {
	if _, err := assemble([]bpfInsn{{jt: "nowhere"}}); err == nil {
		t.Error("a jump to a missing label was accepted")
	}
	if _, err := assemble([]bpfInsn{{label: "back"}, {jt: "back"}}); err == nil {
		t.Error("a backward jump was accepted")
	}
}

// TestLockdownNAT runs LockdownNAT in a child: AF_INET/AF_INET6 sockets and
// connect work, every other family, bind, socketpair and exec are refused.
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
	if err := LockdownNAT(); err != nil {
		fail(err.Error())
	}
	st, _ := os.ReadFile("/proc/self/status")
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
	if _, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0); !errors.Is(err, unix.EPERM) {
		fail("socketpair was not refused")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		fail("socket: " + err.Error())
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{}); !errors.Is(err, unix.EPERM) {
		fail("bind was not refused")
	}
	if err := exec.Command("/bin/true").Run(); err == nil || !errors.Is(err, unix.EPERM) {
		fail("exec was not refused")
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); !errors.Is(err, unix.EPERM) {
		fail("unshare was not refused")
	}
	os.Stdout.WriteString("lockdown-nat-ok\n")
	os.Exit(0)
}
