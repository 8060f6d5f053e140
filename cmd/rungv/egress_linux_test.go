package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// netnsHTTPD serves body as / with busybox httpd on port 80 of every
// address of namespace ns, until t ends.
func netnsHTTPD(t *testing.T, ns, body string) {
	t.Helper()
	www := t.TempDir()
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
			return
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
// 80 of all of them. rungv runs in that namespace (ip netns exec). By
// default the guest reaches none of them, 10.0.2.2:80 (the namespace's
// loopback) included; each allow opens only what it names.
func TestNATEgressNetns(t *testing.T) {
	ns := testNetns(t, "169.254.169.254/32", "10.99.0.1/32", "198.51.100.1/32")
	in := user{name: "root", wrap: []string{"ip", "netns", "exec", ns}}
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
	in := user{name: "root", wrap: []string{"ip", "netns", "exec", a}}
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
