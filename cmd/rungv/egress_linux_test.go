package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testNetns makes a network namespace of the test's own (ip netns add),
// with lo up and a dummy interface (lo where there is no dummy driver)
// holding addrs, and deletes it when t ends. It skips when not root or without ip(8). Nothing in it routes
// anywhere: traffic to its addresses stays in it.
func testNetns(t *testing.T, addrs ...string) (name string) {
	t.Helper()
	name = addNetns(t)
	ipn := func(args ...string) ([]byte, error) {
		return exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput()
	}
	dev := "gvxdummy0"
	if out, err := ipn("link", "add", dev, "type", "dummy"); err != nil {
		// No dummy driver (a container without the module): lo holds
		// the addresses instead, as local to the namespace as a dummy.
		t.Logf("ip link add type dummy: %v %s; using lo", err, out)
		dev = "lo"
	}
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for _, a := range addrs {
		cmds = append(cmds, []string{"addr", "add", a, "dev", dev})
	}
	cmds = append(cmds, []string{"link", "set", dev, "up"})
	for _, c := range cmds {
		if out, err := ipn(c...); err != nil {
			t.Fatalf("ip -n %s %s: %v %s", name, strings.Join(c, " "), err, out)
		}
	}
	return name
}

// addNetns makes an empty network namespace (ip netns add gvxtest-RANDOM)
// deleted when t ends; it skips when not root or without ip(8).
func addNetns(t *testing.T) string {
	t.Helper()
	need(t, asRoot)
	if os.Getuid() != 0 {
		t.Skip("ip netns needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) is missing: cannot make a network namespace")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	name := "gvxtest-" + hex.EncodeToString(rnd[:])
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v %s", name, err, out)
		}
	})
	return name
}

// inNetns is root running rungv in network namespace ns. nsenter, not ip
// netns exec: that also remounts /sys, and rungv then finds no cgroupfs
// for its limits.
func inNetns(t *testing.T, ns string) user {
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) is missing")
	}
	return user{name: "root", wrap: []string{"nsenter", "--net=/run/netns/" + ns}}
}

// netnsHTTPD serves body as / with busybox httpd on port 80 of every
// address of namespace ns, until t ends, and returns its directory.
func netnsHTTPD(t *testing.T, ns, body string) (www string) {
	t.Helper()
	www = t.TempDir()
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	httpd := exec.Command("ip", "netns", "exec", ns, "busybox", "httpd", "-f", "-p", "80", "-h", www)
	if err := httpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { httpd.Process.Kill(); httpd.Wait() })
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "exec", ns, "busybox", "wget", "-qO-", "http://127.0.0.1/").Output()
		if string(out) == body+"\n" {
			return www
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("busybox httpd in %s does not answer", ns)
		}
	}
}

// TestNATEgressNetns plays the attacker end to end, in a network namespace
// the test makes (never touching a real metadata service or network): it
// holds 169.254.169.254 (a stand-in cloud metadata service), 10.99.0.1
// (a private network), 198.51.100.1 (a host address in public space: only
// the own-address rule refuses it) and lo, with one busybox httpd on port
// 80 of all of them. rungv runs in that namespace (nsenter --net). By
// default the guest reaches none of them, 10.0.2.2:80 (the namespace's
// loopback) included; each allow opens only what it names.
func TestNATEgressNetns(t *testing.T) {
	ns := testNetns(t, "169.254.169.254/32", "10.99.0.1/32", "198.51.100.1/32")
	in := inNetns(t, ns)
	netnsHTTPD(t, ns, "netns-secret")

	targets := []string{"169.254.169.254", "10.0.2.2", "10.99.0.1", "198.51.100.1"}
	script := ""
	for _, ip := range targets {
		// No -T: busybox wget's timeout crashes under the Sentry.
		script += "if wget -qO- http://" + ip + "/ >/tmp/out 2>/tmp/err; then echo " + ip + " $(cat /tmp/out); else echo " + ip + " $(cat /tmp/err); fi; "
	}
	for _, c := range []struct {
		flags []string
		open  map[string]bool
	}{
		{nil, nil},
		{[]string{"--egress", "allow=169.254.169.254/32"}, map[string]bool{"169.254.169.254": true}},
		{[]string{"--allow-host-port", "80", "--egress", "allow=10.99.0.0/16:80", "--egress", "allow=198.51.100.1"},
			map[string]bool{"10.0.2.2": true, "10.99.0.1": true, "198.51.100.1": true}},
		// A deny rule wins over an allow of the same address.
		{[]string{"--egress", "allow=169.254.169.254", "--egress", "deny=169.254.0.0/16:80"}, nil},
	} {
		tmp := privateTmp(t, in)
		args := append(append([]string{"run", "--rm", "--network", "nat"}, c.flags...), imageRef, "sh", "-c", script)
		r := runRungv(t, in, tmp, "", args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d; stderr %s", c.flags, r.code, natTail(r.stderr))
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			ip, rest, _ := strings.Cut(l, " ")
			got[ip] = rest
		}
		for _, ip := range targets {
			switch {
			case c.open[ip] && got[ip] != "netns-secret":
				t.Errorf("%v: %s is allowed but the guest got %q", c.flags, ip, got[ip])
			case !c.open[ip] && (strings.Contains(got[ip], "netns-secret") || !strings.Contains(got[ip], "refused")):
				t.Errorf("%v: %s must be refused; the guest got %q", c.flags, ip, got[ip])
			}
		}
		checkClean(t, tmp)
	}
}

// TestNATEgressOutsideWorld: what the default allows works end to end,
// with rungv locked down (its connect-time local check included): rungv
// runs in one namespace the test makes, a server in a second one behind
// a veth pair, at 198.18.0.2 (public space: the outside world to the
// policy). The guest fetches from it by default and not with a deny rule
// covering it.
func TestNATEgressOutsideWorld(t *testing.T) {
	a, b := addNetns(t), addNetns(t)
	for _, c := range [][]string{
		{"-n", a, "link", "add", "gvxva", "type", "veth", "peer", "name", "gvxvb", "netns", b},
		{"-n", a, "addr", "add", "198.18.0.1/24", "dev", "gvxva"},
		{"-n", b, "addr", "add", "198.18.0.2/24", "dev", "gvxvb"},
		{"-n", a, "link", "set", "gvxva", "up"},
		{"-n", b, "link", "set", "gvxvb", "up"},
		{"-n", a, "link", "set", "lo", "up"},
		{"-n", b, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(c, " "), err, out)
		}
	}
	netnsHTTPD(t, b, "outside-world")
	in := inNetns(t, a)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "outside-world"},
		{[]string{"--egress", "deny=198.18.0.0/15:80"}, "refused"},
	} {
		tmp := privateTmp(t, in)
		args := append(append([]string{"run", "--rm", "--network", "nat"}, c.flags...), imageRef, "sh", "-c", "wget -qO- http://198.18.0.2/ 2>&1")
		r := runRungv(t, in, tmp, "", args...)
		if !strings.Contains(r.stdout, c.want) {
			t.Errorf("%v: exit %d, %q; want %q; stderr %s", c.flags, r.code, r.stdout, c.want, natTail(r.stderr))
		}
		checkClean(t, tmp)
	}
}

// floodGuest is a guest program: it opens up to N TCP connections to
// ADDR, writes 256 KiB into each without reading, prints how many opened
// and holds them until killed.
const floodGuest = `package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	payload := make([]byte, 256<<10)
	var conns []net.Conn
	refused := 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", os.Args[1], 5*time.Second)
		if err != nil {
			refused++
			continue
		}
		c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		c.Write(payload)
		conns = append(conns, c)
	}
	fmt.Println("open", len(conns), "refused", refused)
	time.Sleep(time.Hour)
}
`

// TestNATFloodCapped plays a guest that floods the NAT with connections
// that it never reads from, to a host server that never reads either and
// writes 1 MiB into each: the host sees at most DefaultNATMaxRelays (256)
// of them at once, and the rungv process (the host side) stays small.
func TestNATFloodCapped(t *testing.T) {
	need(t, asRoot)
	needNamespaces(t, asRoot) // the flood program comes in by a bind mount
	dir := t.TempDir()
	for name, body := range map[string]string{"main.go": floodGuest, "go.mod": "module flood\n\ngo 1.21\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "flood"), ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the guest program: %v %s", err, out)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var live, most atomic.Int32
	go func() {
		junk := make([]byte, 1<<20)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := live.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			go func() {
				c.Write(junk) // blocks once the buffers are full
				io.Copy(io.Discard, c)
				c.Close()
				live.Add(-1)
			}()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	tmp := privateTmp(t, asRoot)
	c := command(t, asRoot, tmp, "run", "--rm", "--network", "nat", "--allow-host-port", port,
		"--mount", "type=bind,src="+dir+",dst=/flood,readonly", imageRef, "/flood/flood", "10.0.2.2:"+port, "1000")
	line, stderr := startLines(t, c)
	got := line()
	var open, refused int
	if _, err := fmt.Sscanf(got, "open %d refused %d", &open, &refused); err != nil {
		t.Fatalf("guest: %q (%v); stderr %s", got, err, stderr.String())
	}
	time.Sleep(time.Second) // let the buffers fill
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var rssKB int
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			fmt.Sscanf(strings.TrimPrefix(l, "VmHWM:"), "%d", &rssKB)
		}
	}
	sockstat, _ := os.ReadFile("/proc/net/sockstat")
	t.Logf("guest: %s; host server: at most %d at once; rungv peak RSS %d MiB; %s", got, most.Load(), rssKB>>10, strings.TrimSpace(string(sockstat)))
	if m := most.Load(); m > 256 || open > 256 {
		t.Errorf("the guest held %d relays (the host server saw %d at once), past the default cap of 256", open, m)
	}
	if open < 200 || refused == 0 {
		t.Errorf("open %d, refused %d: want about 256 opened and the rest refused", open, refused)
	}
	// Before the caps: 1.75 GB. Now 256 relays × (0.5 MiB netstack + a
	// little Go) plus the binary.
	if rssKB > 512<<10 {
		t.Errorf("rungv's peak RSS is %d MiB, want under 512 MiB", rssKB>>10)
	}
	c.Process.Kill()
	c.Wait()
	checkClean(t, tmp)
}
