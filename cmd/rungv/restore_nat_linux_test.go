package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// NAT across a restore (docs/runtime.md, "Checkpoint, restore, fork"):
// each restore gets a fresh link to a NAT of its own, with eth0, routes
// and resolv.conf as the checkpoint's guest had them, and under the
// restore's egress policy.

// natRestoreGuest is the checkpointed guest: once ready it polls URL until
// the test arms the server (after the checkpoint, so only a restore gets
// through), then prints what it fetched, tries each of probes (IP[:PORT]),
// runs then, and shows its network.
func natRestoreGuest(url, then string, probes ...string) string {
	s := "echo ready; until wget -qO /tmp/got " + url + " 2>/dev/null; do sleep 0.1; done; echo \"got $(cat /tmp/got)\"; "
	for _, p := range probes {
		// No -T: busybox wget's timeout crashes under the Sentry.
		s += "if wget -qO- http://" + p + "/ >/tmp/o 2>/tmp/e; then echo \"probe " + p + " reached $(cat /tmp/o)\"; else echo \"probe " + p + " $(cat /tmp/e)\"; fi; "
	}
	return s + then + "; ip -4 addr show eth0; cat /proc/net/route; cat /etc/resolv.conf"
}

// checkpointNAT runs rungv checkpoint of natRestoreGuest as u (with the
// given flags before the image) and returns the checkpoint directory.
func checkpointNAT(t *testing.T, u user, tmp, script string, flags ...string) string {
	t.Helper()
	ck := filepath.Join(privateTmp(t, u), "ck")
	args := append(append([]string{"checkpoint", "--dir", ck, "--isolation", "seccomp-only", "--network", "nat", "--ready", "ready"}, flags...), imageRef, "sh", "-c", script)
	r := runRungv(t, u, tmp, "", args...)
	if r.code != 0 {
		t.Fatalf("rungv checkpoint: exit %d\n%s", r.code, natTail(r.stderr))
	}
	var res struct{ Dir string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Dir != ck {
		t.Fatalf("rungv checkpoint printed %q (%v)", r.stdout, err)
	}
	return ck
}

// restoreNAT restores ck as u with --network nat and flags, waits for the
// guest to end and returns its output, checking the exit status and the
// guest's network: slirp's layout as before the checkpoint.
func restoreNAT(t *testing.T, u user, ck string, flags ...string) string {
	t.Helper()
	tmp := privateTmp(t, u)
	args := append(append([]string{"run", "--isolation", "seccomp-only", "--network", "nat", "--restore", ck}, flags...), imageRef)
	r := runRungv(t, u, tmp, "", args...)
	if r.code != 0 {
		t.Fatalf("rungv run --restore %v: exit %d; stdout %q\n%s", flags, r.code, r.stdout, natTail(r.stderr))
	}
	if !strings.Contains(r.stdout, "inet 10.0.2.15/24") {
		t.Errorf("restore %v: eth0 has no 10.0.2.15/24:\n%s", flags, r.stdout)
	}
	routes := map[string]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 8 && f[0] == "eth0" {
			routes[f[1]+"/"+f[7]] = f[2]
		}
	}
	if routes["00000000/00000000"] != "0202000A" || routes["0002000A/00FFFFFF"] != "00000000" {
		t.Errorf("restore %v: routes %v, want default via 10.0.2.2 and 10.0.2.0/24 on link:\n%s", flags, routes, r.stdout)
	}
	if !strings.Contains(r.stdout, "nameserver 10.0.2.3") {
		t.Errorf("restore %v: resolv.conf does not name 10.0.2.3:\n%s", flags, r.stdout)
	}
	t.Logf("restore %v: the guest printed\n%s", flags, r.stdout)
	checkClean(t, tmp)
	return r.stdout
}

// probeLine is what the guest printed for probe p.
func probeLine(out, p string) string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "probe "+p+" "); ok {
			return rest
		}
	}
	return "(no line)"
}

// armedServer serves, at /blob on 127.0.0.1, 404 until armed and then the
// body armed with.
func armedServer(t *testing.T) (port int, arm func(body string)) {
	t.Helper()
	var body atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := body.Load()
		if b == nil || r.URL.Path != "/blob" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(*b))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, func(s string) { body.Store(&s) }
}

// TestRestoreNAT: an episode checkpointed with --network nat, restored
// twice; each restore reaches the test's server on the host's loopback
// (its port allowed) through a NAT of its own, which the checkpointed
// guest could not (the server answered only after the save), and sees
// eth0, its routes and resolv.conf as before, and its resolver (10.0.2.3,
// UDP) answers through the restore's NAT (pointed at the test's DNS
// responder with GVX_NAT_DNS). Under the default egress policy the
// metadata address and a host port not allowed stay refused in each
// restore.
func TestRestoreNAT(t *testing.T) {
	port, arm := armedServer(t)
	d := newDNSServer(t, "gvx.test", net.IPv4(192, 0, 2, 77))
	t.Setenv("GVX_NAT_DNS", "127.0.0.1:"+strconv.Itoa(d.port))
	closed := httptest.NewServer(http.NotFoundHandler()) // listening, never allowed
	defer closed.Close()
	other := "10.0.2.2:" + strconv.Itoa(closed.Listener.Addr().(*net.TCPAddr).Port)
	allow := []string{"--allow-host-port", strconv.Itoa(port)}
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		dns := "if nslookup -type=a gvx.test 2>&1 | grep -q 192.0.2.77; then echo dns answered; else echo dns failed; fi"
		script := natRestoreGuest("http://10.0.2.2:"+strconv.Itoa(port)+"/blob", dns, "169.254.169.254", other)
		ck := checkpointNAT(t, u, tmp, script, allow...)
		checkClean(t, tmp)
		for _, name := range []string{"restore-1", "restore-2"} {
			arm(name + " as " + u.name)
			out := restoreNAT(t, u, ck, allow...)
			if !strings.Contains(out, "got "+name+" as "+u.name) {
				t.Errorf("%s: the guest did not fetch what the server served now:\n%s", name, out)
			}
			if !strings.Contains(out, "dns answered") {
				t.Errorf("%s: no DNS answer through 10.0.2.3:\n%s", name, out)
			}
			for _, p := range []string{"169.254.169.254", other} {
				if got := probeLine(out, p); strings.Contains(got, "reached") {
					t.Errorf("%s: %s must be refused after a restore; the guest got %q", name, p, got)
				}
			}
		}
		// The saved guest has eth0 and a resolver there: a restore without
		// a NAT would strand it, and is refused.
		r := runRungv(t, u, privateTmp(t, u), "", "run", "--isolation", "seccomp-only", "--network", "none", "--restore", ck, imageRef)
		if r.code != 125 || !strings.Contains(r.stderr, "the checkpoint ran with --network nat: restore it with the same") {
			t.Errorf("restore with --network none: exit %d, %q", r.code, r.stderr)
		}
		// A published port the checkpoint did not have: gVisor saved the
		// ports' descriptor numbers, so the count must match.
		ptmp := privateTmp(t, u)
		r = runRungv(t, u, ptmp, "", append(append([]string{"run", "--isolation", "seccomp-only", "--network", "nat", "--restore", ck, "-p", "unix:" + filepath.Join(ptmp, "x.sock") + ":80"}, allow...), imageRef)...)
		if r.code != 125 || !strings.Contains(r.stderr, "the checkpoint publishes 0 ports, this restore 1") {
			t.Errorf("restore with a -p the checkpoint lacks: exit %d, %q", r.code, r.stderr)
		}
		checkClean(t, ptmp)
	})
}

// TestRestoreNATEgressNetns plays the attacker against a restored guest,
// in a network namespace the test makes: it holds 169.254.169.254 (a
// stand-in metadata service) and lo, busybox httpd on port 80 of both.
// The checkpoint ran with that address allowed; a restore runs under its
// own policy (a NAT is made per restore from its options), so the default
// one refuses it, and its loopback's port 80 (10.0.2.2:80) is reached
// only because it allows that port. A restore that allows the address
// reaches it, which shows the probe would see a leak.
func TestRestoreNATEgressNetns(t *testing.T) {
	ns := testNetns(t, "169.254.169.254/32")
	in := inNetns(t, ns)
	www := netnsHTTPD(t, ns, "netns-secret")
	tmp := privateTmp(t, in)
	// The guest waits for a file the test writes into httpd's directory
	// after the save: /armed, on the namespace's loopback.
	script := natRestoreGuest("http://10.0.2.2/armed", "true", "169.254.169.254")
	ck := checkpointNAT(t, in, tmp, script, "--allow-host-port", "80", "--egress", "allow=169.254.169.254/32")
	checkClean(t, tmp)
	if err := os.WriteFile(filepath.Join(www, "armed"), []byte("armed"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags []string
		open  bool
	}{
		{[]string{"--allow-host-port", "80"}, false},
		{[]string{"--allow-host-port", "80"}, false},
		{[]string{"--allow-host-port", "80", "--egress", "allow=169.254.169.254/32"}, true},
	} {
		out := restoreNAT(t, in, ck, c.flags...)
		if !strings.Contains(out, "got armed") {
			t.Errorf("%v: the restored guest did not reach 10.0.2.2:80:\n%s", c.flags, out)
		}
		got := probeLine(out, "169.254.169.254")
		switch {
		case c.open && got != "reached netns-secret":
			t.Errorf("%v: 169.254.169.254 is allowed but the guest got %q", c.flags, got)
		case !c.open && (strings.Contains(got, "netns-secret") || !strings.Contains(got, "refused")):
			t.Errorf("%v: 169.254.169.254 must be refused; the guest got %q", c.flags, got)
		}
	}
}
