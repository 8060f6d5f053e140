package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

// control is the test's end of rungv run's --control-fd socket.
type control struct {
	t    *testing.T
	ours *os.File
	in   *bufio.Reader
}

// newControl makes the socket pair; theirs goes to rungv as fd 3.
func newControl(t *testing.T) (c *control, theirs *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-rungv")
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return &control{t: t, ours: ours, in: bufio.NewReader(ours)}, theirs
}

// do sends r and returns the reply.
func (c *control) do(r spec.ControlRequest) spec.ControlReply {
	c.t.Helper()
	b, _ := json.Marshal(r)
	if _, err := c.ours.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("control: %v", err)
	}
	line, err := c.in.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("control: no reply to %s: %v", b, err)
	}
	var rep spec.ControlReply
	if err := json.Unmarshal(line, &rep); err != nil {
		c.t.Fatalf("control: reply %q: %v", line, err)
	}
	return rep
}

// composeLike starts, on d, what a Compose project with two services on
// a user-defined network is: network n, container web serving a page on
// port 8080, container app beside it.
func composeLike(t *testing.T, d *daemon) {
	t.Helper()
	d.must("network", "create", "n")
	d.must("run", "-d", "--network", "n", "--name", "web", dindtest.HelloTag, "sh", "-c",
		"mkdir -p /www && echo served-by-web >/www/index.html && exec busybox httpd -f -p 8080 -h /www")
	d.must("run", "-d", "--network", "n", "--name", "app", dindtest.HelloTag, "sleep", "100000")
}

// fetch is app's GET of web's page at address ip (busybox nc: the
// image's busybox is static glibc, whose name lookups crash in a
// container), and, with byName, app's lookup of the name web through
// Docker's DNS (busybox nslookup, its own resolver), which must answer ip.
func fetch(d *daemon, ip string, byName bool) error {
	out, err := dockerWithin(d, "exec", "app", "sh", "-c", "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 "+ip+" 8080")
	if !strings.Contains(out, "served-by-web") {
		return fmt.Errorf("GET http://%s:8080/ printed %q (%v)", ip, out, err)
	}
	if !byName {
		return nil
	}
	out, err = dockerWithin(d, "exec", "app", "busybox", "nslookup", "web")
	if !strings.Contains(out, "Address: "+ip) {
		return fmt.Errorf("nslookup web printed %q (%v), not %s", out, err, ip)
	}
	return nil
}

// TestForkDockerNetwork is issue 30's fork of an episode whose
// containers run: dockerd (sid's Docker 28) on a volume, a user-defined
// network with two containers on it, one serving, then a fork (the
// control socket's checkpoint with resume, the volume cloned while
// paused) into 2 children restored from it. The parent goes on: app
// still fetches web's page, by name where Docker's DNS answers before
// the fork, and a fork refused first (a client held a connection to the
// Docker socket) changed nothing and did not use the episode's one fork.
// Each child restores with the containers still running: its
// dockerd answers, docker ps lists them running, docker exec works in
// them, and app fetches web's page by address (0007, "network-N") and by
// name (0009, "names-N").
func TestForkDockerNetwork(t *testing.T) {
	s := needDind(t, dindtest.Sid)
	need(t, asRoot)
	needPatch(t, "0002-netns-resume-after-save")
	needPatch(t, "0003-bridge-fdb-save")
	tmp, dir := privateTmp(t, asRoot), privateTmp(t, asRoot)
	vol, ck := filepath.Join(dir, "parent.ext4"), filepath.Join(dir, "ck")
	ctl, theirs := newControl(t)
	mode := []string{"--isolation", "seccomp-only", "--network", "none"}
	d := startDaemonFiles(t, s, asRoot, tmp, privateTmp(t, asRoot), "type=volume,src="+vol+",dst=/var/lib/docker,size=4G", []*os.File{theirs},
		append(mode, "--checkpoint-dir", ck, "--control-fd", "3")...)
	theirs.Close()
	d.must("load", "-i", s.hello)
	composeLike(t, d)
	ip := strings.TrimSpace(d.must("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", "web"))
	byName := true
	if err := fetch(d, ip, true); err != nil {
		t.Logf("before the fork: %v: Docker's DNS does not answer in this episode; checking by address only", err)
		byName = false
	}
	if err := fetch(d, ip, byName); err != nil {
		t.Fatalf("before the fork: %v", err)
	}

	// A fork made impossible on purpose: a client holds a connection to
	// the published Docker socket (a host socket the guest holds, which
	// gVisor cannot save). It is refused in one line, the parent's
	// containers answer as before, and the episode may be forked again.
	hold, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Write([]byte("GET /_ping HTTP/1.1\r\nHost: docker\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the relay has handed it to the guest
	rep := ctl.do(spec.ControlRequest{Op: spec.OpCheckpoint, Resume: true})
	hold.Close()
	if rep.Error == "" || strings.Contains(rep.Error, "\n") || !strings.Contains(rep.Error, "host socket") {
		t.Errorf("a fork with a client connected: %+v, want a one-line refusal naming the host socket", rep)
	}
	if err := fetch(d, ip, byName); err != nil {
		t.Fatalf("after the refused fork, the parent: %v", err)
	}

	rep = ctl.do(spec.ControlRequest{Op: spec.OpCheckpoint, Resume: true})
	if rep.Error != "" || rep.Op != spec.OpPaused {
		if strings.Count(rep.Error, "\n") > 0 || len(rep.Error) > 1000 {
			t.Errorf("the failed fork's error is not one short line (%d bytes)", len(rep.Error))
		}
		t.Fatalf("the fork failed: %q; afterwards the parent: %v", firstLine(rep.Error), fetch(d, ip, byName))
	}
	const n = 2
	var kids []string
	for i := range n {
		k := filepath.Join(dir, "child-"+strconv.Itoa(i)+".ext4")
		if _, err := reflink.CloneFile(vol, k, reflink.Options{Mode: reflink.Auto}); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, k)
	}
	if rep := ctl.do(spec.ControlRequest{Op: spec.OpResume}); rep.Error != "" || rep.Op != spec.OpResumed {
		t.Fatalf("resume: %+v", rep)
	}
	if err := fetch(d, ip, byName); err != nil {
		t.Errorf("after the fork, the parent: %v", err)
	}
	t.Run("children", func(t *testing.T) {
		needPatch(t, "0006-netns-stacks-restore")
		for i, k := range kids {
			// The restore completes (0006-netns-stacks-restore: before, it
			// waited for good on the containers' TCP endpoints and docker
			// info never answered), dockerd answers, and the containers
			// and their processes run on.
			c := startDaemon(t, s, asRoot, tmp, privateTmp(t, asRoot), "type=volume,src="+k+",dst=/var/lib/docker", append(mode, "--restore", ck)...)
			if out, err := dockerWithin(c, "ps", "--format", "{{.Names}} {{.State}}"); !strings.Contains(out, "web running") || !strings.Contains(out, "app running") {
				t.Errorf("child %d: docker ps printed %q (%v), want web and app running", i, out, err)
			}
			if out, err := dockerWithin(c, "exec", "web", "sh", "-c", "cat /www/index.html"); strings.TrimSpace(out) != "served-by-web" {
				t.Errorf("child %d: docker exec in web printed %q (%v)", i, out, err)
			}
			t.Run("network-"+strconv.Itoa(i), func(t *testing.T) {
				// 0007-netns-links-restore: eth0 with its address and
				// routes, and the bridge's ports, are back (without it a
				// container's namespace has loopback only: "Network is
				// unreachable").
				needPatch(t, "0007-netns-links-restore")
				if err := fetch(c, ip, false); err != nil {
					t.Errorf("child %d: %v\n%s", i, err, tail(c.log.String()))
				}
			})
			t.Run("names-"+strconv.Itoa(i), func(t *testing.T) {
				// 0009-netns-iptables-save: app resolves web by name.
				// Docker's DNS (127.0.0.11) is DNAT rules dockerd put in
				// the container's namespace, and gVisor saves no stack's
				// iptables: without the patch the child's namespace has
				// empty tables ("write to '127.0.0.11': Connection
				// refused").
				needPatch(t, "0009-netns-iptables-save")
				if !byName {
					t.Skipf("child %d: Docker's DNS did not answer in the parent before the fork either", i)
				}
				if err := fetch(c, ip, true); err != nil {
					t.Errorf("child %d: %v", i, err)
				}
			})
			c.stop()
		}
	})
	// The parent still answers by name once its children ran: the save
	// left its connection table and tables as they were.
	if err := fetch(d, ip, byName); err != nil {
		t.Errorf("after the children, the parent: %v", err)
	}
	d.stop()
}

// dockerWithin is d.docker bounded to 60 s: a daemon or container that
// no longer answers fails the check instead of hanging the test.
func dockerWithin(d *daemon, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, d.cli, append([]string{"-H", "unix://" + d.sock}, args...)...)
	c.Env = append(os.Environ(), d.env...)
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("docker %s: no answer in 60 s", args[0])
	}
	return string(out), err
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
