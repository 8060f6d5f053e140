package main

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"z.gfire.dev/gvx/image/imagetest"
)

// hostHTTP serves body at /blob on 127.0.0.1 and returns the port.
func hostHTTP(t *testing.T, body []byte) int {
	t.Helper()
	return hostHTTPOn(t, "127.0.0.1", body)
}

// hostHTTPOn serves body at /blob on ip and returns the port.
func hostHTTPOn(t *testing.T, ip string, body []byte) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/blob" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNATHTTP fetches a multi-MiB body from a host server on 127.0.0.1
// through the gateway address (its port allowed); it must arrive byte for
// byte.
func TestNATHTTP(t *testing.T) {
	body := randomBytes(t, 6<<20+12345)
	port := hostHTTP(t, body)
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		url := "http://10.0.2.2:" + strconv.Itoa(port) + "/blob"
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(port), imageRef, "wget", "-qO-", url)
		if r.code != 0 || !bytes.Equal([]byte(r.stdout), body) {
			t.Fatalf("exit %d, %d bytes (want %d, equal %v); stderr:\n%s", r.code, len(r.stdout), len(body), r.stdout == string(body), natTail(r.stderr))
		}
		checkClean(t, tmp)
	})
}

// natTail is the end of a long output.
func natTail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return strings.TrimSpace(s)
}

// TestNATGuestView checks the guest's interface, routes and resolver: slirp's
// layout.
func TestNATGuestView(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", imageRef, "sh", "-c",
			"ip -4 addr show eth0; echo ---; cat /proc/net/route; echo ---; cat /etc/resolv.conf")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		parts := strings.Split(r.stdout, "---\n")
		if len(parts) != 3 {
			t.Fatalf("output: %q", r.stdout)
		}
		if !strings.Contains(parts[0], "inet 10.0.2.15/24") {
			t.Errorf("eth0 has no 10.0.2.15/24:\n%s", parts[0])
		}
		// /proc/net/route: little-endian hex; default route (0.0.0.0/0)
		// via 10.0.2.2 and the on-link 10.0.2.0/24.
		routes := map[string]string{}
		for _, l := range strings.Split(parts[1], "\n")[1:] {
			f := strings.Fields(l)
			if len(f) >= 8 && f[0] == "eth0" {
				routes[f[1]+"/"+f[7]] = f[2]
			}
		}
		if routes["00000000/00000000"] != "0202000A" || routes["0002000A/00FFFFFF"] != "00000000" {
			t.Errorf("routes %v from\n%s", routes, parts[1])
		}
		if strings.TrimSpace(parts[2]) != "nameserver 10.0.2.3" {
			t.Errorf("resolv.conf: %q", parts[2])
		}
		checkClean(t, tmp)
	})
}

// TestNATNone: with --network none the same fetch fails (and eth0 does not
// exist).
func TestNATNone(t *testing.T) {
	port := hostHTTP(t, []byte("secret"))
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "none", imageRef, "sh", "-c",
			"ip link show eth0; wget -T 3 -qO- http://10.0.2.2:"+strconv.Itoa(port)+"/blob")
		if r.code == 0 || strings.Contains(r.stdout, "secret") {
			t.Fatalf("the guest reached the host without a network: exit %d, %q", r.code, r.stdout)
		}
		checkClean(t, tmp)
	})
}

// TestNATRefused: a closed host port is refused at once (the forwarder
// resets the guest's connection), allowed or not.
func TestNATRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(port), imageRef, "wget", "-qO-", "http://10.0.2.2:"+strconv.Itoa(port)+"/")
		if r.code == 0 || !strings.Contains(r.stderr, "refused") {
			t.Fatalf("exit %d, stderr %q: want connection refused", r.code, r.stderr)
		}
	})
}

// TestNATHostLoopbackDenied plays the attacker: a live server on the
// host's 127.0.0.1 (as another episode's -p 127.0.0.1:PORT or a local
// Docker API) is refused through 10.0.2.2 by default and never sees a
// request; --allow-host-port of another port does not open it; its own
// port does.
func TestNATHostLoopbackDenied(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "host-secret")
	}))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	url := "http://10.0.2.2:" + port + "/"
	both(t, func(t *testing.T, u user) {
		hits.Store(0)
		tmp := privateTmp(t, u)
		for _, extra := range [][]string{nil, {"--allow-host-port", "1"}} {
			args := append(append([]string{"run", "--rm", "--network", "nat"}, extra...), imageRef, "wget", "-qO-", url)
			r := runRungv(t, u, tmp, "", args...)
			if r.code == 0 || strings.Contains(r.stdout, "host-secret") || !strings.Contains(r.stderr, "refused") {
				t.Fatalf("%v: exit %d, %q, stderr %q: want connection refused", extra, r.code, r.stdout, r.stderr)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("the host server saw %d requests from a guest without --allow-host-port %s", n, port)
		}
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--allow-host-port", port, imageRef, "wget", "-qO-", url)
		if r.code != 0 || r.stdout != "host-secret" {
			t.Fatalf("--allow-host-port %s: exit %d, %q, stderr %q", port, r.code, r.stdout, r.stderr)
		}
		checkClean(t, tmp)
	})
}

// dnsServer is a tiny UDP DNS responder on 127.0.0.1: A queries for
// name get ip; others get an empty answer. It counts the queries.
type dnsServer struct {
	port    int
	queries atomic.Int32
}

func newDNSServer(t *testing.T, name string, ip net.IP) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &dnsServer{port: pc.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], name, ip.To4()); resp != nil {
				d.queries.Add(1)
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return d
}

// dnsAnswer answers one DNS query (RFC 1035 4.1): the question is copied,
// an A record for name added when asked for.
func dnsAnswer(q []byte, name string, ip net.IP) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l > 63 || i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	end := i + 5
	resp := append([]byte{}, q[:end]...)
	resp[2], resp[3] = 0x81, 0x80 // response, RD, RA, no error
	binary.BigEndian.PutUint16(resp[6:], 0)
	binary.BigEndian.PutUint16(resp[8:], 0)
	binary.BigEndian.PutUint16(resp[10:], 0)
	if qtype == 1 && strings.EqualFold(strings.Join(labels, "."), name) {
		binary.BigEndian.PutUint16(resp[6:], 1)
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		resp = append(resp, ip...)
	}
	return resp
}

// TestNATUDP: a UDP request and its answer go through the NAT both ways,
// to a host server on 127.0.0.1 (via 10.0.2.2) and to the DNS forwarder
// (10.0.2.3:53, pointed at the same server with GVX_NAT_DNS: a resolver
// on the host's loopback is reached without --allow-host-port, the
// policy's one exception, while 10.0.2.2 to it is refused). Debian's busybox nc has no -u; busybox
// nslookup is the UDP client.
func TestNATUDP(t *testing.T) {
	d := newDNSServer(t, "gvx.test", net.IPv4(192, 0, 2, 77))
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		before := d.queries.Load()
		c := command(t, u, tmp, "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(d.port), imageRef, "sh", "-c",
			fmt.Sprintf("nslookup -type=a gvx.test 10.0.2.2:%d && echo --- && nslookup -type=a gvx.test", d.port))
		c.Env = append(c.Env, "GVX_NAT_DNS=127.0.0.1:"+strconv.Itoa(d.port))
		out, err := c.CombinedOutput()
		parts := strings.Split(string(out), "---")
		if err != nil || len(parts) != 2 || !strings.Contains(parts[0], "192.0.2.77") || !strings.Contains(parts[1], "192.0.2.77") {
			t.Fatalf("%v:\n%s", err, out)
		}
		if !strings.Contains(parts[1], "10.0.2.3") {
			t.Errorf("the second lookup did not use 10.0.2.3:\n%s", parts[1])
		}
		if n := d.queries.Load() - before; n < 2 {
			t.Errorf("the host server saw %d queries, want at least 2", n)
		}
		// Without --allow-host-port: the resolver on the host's loopback
		// is still reached through 10.0.2.3 (the exception), not
		// through 10.0.2.2.
		before = d.queries.Load()
		c = command(t, u, tmp, "run", "--rm", "--network", "nat", imageRef, "sh", "-c",
			fmt.Sprintf("nslookup -type=a gvx.test && echo --- && timeout 2 nslookup -type=a gvx.test 10.0.2.2:%d; echo exit=$?", d.port))
		c.Env = append(c.Env, "GVX_NAT_DNS=127.0.0.1:"+strconv.Itoa(d.port))
		out, err = c.CombinedOutput()
		parts = strings.Split(string(out), "---")
		if err != nil || len(parts) != 2 || !strings.Contains(parts[0], "192.0.2.77") || strings.Contains(parts[1], "192.0.2.77") || strings.Contains(parts[1], "exit=0") {
			t.Fatalf("want the lookup through 10.0.2.3 to work and the one through 10.0.2.2 to fail: %v:\n%s", err, out)
		}
		if n := d.queries.Load() - before; n != 1 {
			t.Errorf("the host server saw %d queries, want 1 (through 10.0.2.3 only)", n)
		}
		checkClean(t, tmp)
	})
}

// TestNATHostAddress: a server on one of the host's own non-loopback
// addresses is refused by default (the host's own addresses, and here
// likely a private range too), and reached with --egress allowing it.
func TestNATHostAddress(t *testing.T) {
	ip := hostIPv4(t)
	body := randomBytes(t, 256<<10)
	port := hostHTTPOn(t, ip, body)
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/blob"
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", imageRef, "wget", "-qO-", url)
		if r.code == 0 || len(r.stdout) > 0 || !strings.Contains(r.stderr, "refused") {
			t.Fatalf("default policy: exit %d, %d bytes, stderr %s: want connection refused", r.code, len(r.stdout), r.stderr)
		}
		r = runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--egress", "allow="+ip+":"+strconv.Itoa(port), imageRef, "wget", "-qO-", url)
		if r.code != 0 || r.stdout != string(body) {
			t.Fatalf("allowed: exit %d, %d bytes, want %d; stderr %s", r.code, len(r.stdout), len(body), r.stderr)
		}
	})
}

// hostIPv4 returns a non-loopback IPv4 address of the host or skips.
func hostIPv4(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("the host has no non-loopback IPv4 address")
	return ""
}

// TestNATVolume: NAT in an episode with an ext4lite volume (runsc then
// runs with --rootless, which its own run subcommand refuses with
// --network=sandbox): a download lands in the volume intact.
func TestNATVolume(t *testing.T) {
	body := randomBytes(t, 3<<20)
	sum := md5.Sum(body)
	port := hostHTTP(t, body)
	both(t, func(t *testing.T, u user) {
		vol := newVolume(t, u, 64<<20)
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(port), "--mount", "type=volume,src="+vol+",dst=/vol", imageRef, "sh", "-c",
			"wget -qO /vol/blob http://10.0.2.2:"+strconv.Itoa(port)+"/blob && md5sum /vol/blob")
		if r.code != 0 || !strings.HasPrefix(r.stdout, hex.EncodeToString(sum[:])) {
			t.Fatalf("exit %d, %q, want md5 %x; stderr %s", r.code, r.stdout, sum, r.stderr)
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
	})
}

// TestNATKillLeavesNothing SIGKILLs a NAT episode's rungv (locked down,
// with its netstack serving a live connection): nothing may remain.
func TestNATKillLeavesNothing(t *testing.T) {
	port := hostHTTP(t, []byte("x"))
	both(t, func(t *testing.T, u user) {
		needNamespaces(t, u)
		tmp := privateTmp(t, u)
		c := command(t, u, tmp, "run", "--network", "nat", "--allow-host-port", strconv.Itoa(port), imageRef, "sh", "-c",
			"wget -qO- http://10.0.2.2:"+strconv.Itoa(port)+"/blob && echo started; exec sleep 1000")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		c.Stdout = pw
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		got, _ := bufio.NewReader(pr).ReadString('\n')
		if got != "xstarted\n" {
			c.Process.Kill()
			c.Wait()
			t.Fatalf("guest did not start: %q", got)
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Process.Pid))
		if !bytes.Contains(st, []byte("Seccomp:\t2")) {
			t.Errorf("rungv is not locked down:\n%s", st)
		}
		if err := syscall.Kill(c.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		pr.Close()
		checkClean(t, tmp)
	})
}

// BenchmarkNATDownload: the guest downloads 64 MiB from a host server on
// 127.0.0.1 through the NAT, b.N times in one episode (so the episode's
// start, ~0.2 s, is amortized over b.N; run with -benchtime=Nx).
func BenchmarkNATDownload(b *testing.B) {
	if setupErr != nil || os.Getuid() != 0 {
		b.Skip("needs root and the test image:", setupErr)
	}
	const size = 64 << 20
	body := make([]byte, size)
	if _, err := rand.Read(body); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tmp, err := os.MkdirTemp(shared, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	script := fmt.Sprintf("for i in $(seq %d); do wget -qO /dev/null http://10.0.2.2:%d/blob || exit 1; done", b.N, port)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	c := exec.Command(rungvBin, "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(port), imageRef, "sh", "-c", script)
	c.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"))
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
}

// BenchmarkNATStart: what --network nat adds to an episode's start (veth,
// packet socket, netstack, scraping eth0, the resolv.conf bind).
func BenchmarkNATStart(b *testing.B) {
	if setupErr != nil || os.Getuid() != 0 {
		b.Skip("needs root and the test image:", setupErr)
	}
	tmp, err := os.MkdirTemp(shared, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, net := range []string{"none", "nat"} {
		b.Run(net, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c := exec.Command(rungvBin, "run", "--rm", "--network", net, imageRef, "true")
				c.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"))
				if out, err := c.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}

// TestNATDockerPull is the seeds' NAT episode, as nobody: dockerd in the
// dind image with /var/lib/docker on an ext4lite volume and --network nat
// pulls an image from a registry on the host's loopback (go-containerregistry's
// in-memory registry, reached as 10.0.2.2:PORT with --allow-host-port
// PORT) and runs it; with each daemon flavour.
func TestNATDockerPull(t *testing.T) { forEachFlavour(t, testNATDockerPull) }

func testNATDockerPull(t *testing.T, s dindSetup) {
	need(t, asNobody)
	img, err := imagetest.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go reg.Serve(l)
	t.Cleanup(func() { reg.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	ref, err := name.ParseReference(fmt.Sprintf("127.0.0.1:%d/gvx/hello:nat", port))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}

	tmp, sockDir := privateTmp(t, asNobody), privateTmp(t, asNobody)
	vol := newVolume(t, asNobody, 4<<30)
	gateway := fmt.Sprintf("10.0.2.2:%d", port)
	d := startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+vol+",dst=/var/lib/docker",
		"--network", "nat", "--allow-host-port", strconv.Itoa(port), "-e", "DOCKERD_EXTRA_FLAGS=--insecure-registry="+gateway)
	d.must("pull", gateway+"/gvx/hello:nat")
	if out := d.must("run", "--rm", gateway+"/gvx/hello:nat", "echo", "pulled"); strings.TrimSpace(out) != "pulled" {
		t.Fatalf("docker run of the pulled image printed %q", out)
	}
	d.stop()
	checkClean(t, tmp)
	e2fsck(t, vol)
}

// TestNATUpload: ~8 MiB from the guest to a host server (the other
// direction): the server's md5 and size of what it received equal the
// guest's.
func TestNATUpload(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := md5.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%x %d\n", h.Sum(nil), n)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		r := runRungv(t, u, tmp, "", "run", "--rm", "--network", "nat", "--allow-host-port", strconv.Itoa(port), imageRef, "sh", "-c",
			// busybox wget posts the file as a C string: no NUL bytes.
			"head -c 8388608 /dev/urandom | tr -d '\\000' >/tmp/f && echo $(md5sum </tmp/f | cut -d' ' -f1) $(wc -c </tmp/f) && wget -qO- --post-file=/tmp/f http://10.0.2.2:"+strconv.Itoa(port)+"/")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var size int
		if len(lines) == 2 {
			fmt.Sscanf(lines[0][strings.LastIndex(lines[0], " ")+1:], "%d", &size)
		}
		if r.code != 0 || len(lines) != 2 || lines[1] != lines[0] || size < 8<<20-(8<<20)/128 {
			t.Fatalf("exit %d, %q; stderr %s", r.code, r.stdout, r.stderr)
		}
	})
}
