package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/reflink"
)

// Docker inside plain `rungv run`: the Debian docker.io image of
// image/dindtest in each flavour (bookworm's Docker 20.10, sid's Docker
// 28), its daemon's port published as a host unix socket, a docker CLI on
// the host driving it.

// dindSetup is what every dind test needs: the flavour, its image layout,
// the hello archive and the host's docker CLI.
type dindSetup struct {
	flavour               dindtest.Flavour
	layout, hello, docker string
}

// forEachFlavour runs f as a subtest per daemon flavour.
func forEachFlavour(t *testing.T, f func(t *testing.T, s dindSetup)) {
	for _, fl := range dindtest.Flavours {
		t.Run(fl.Name, func(t *testing.T) { f(t, needDind(t, fl)) })
	}
}

// needDind builds (once per cache) flavour f's image, or skips t.
func needDind(t *testing.T, f dindtest.Flavour) dindSetup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the dind image is built as root (debootstrap)")
	}
	if setupErr != nil {
		t.Skip(setupErr)
	}
	dockerCLI := "/usr/bin/docker"
	if _, err := os.Stat(dockerCLI); err != nil {
		p, err := exec.LookPath("docker")
		if err != nil {
			t.Skip("no docker CLI (apt-get install docker.io)")
		}
		dockerCLI = p
	}
	layout := f.Layout(t)
	hello := filepath.Join(shared, "hello.tar")
	if _, err := os.Stat(hello); err != nil {
		if err := dindtest.WriteHello(hello); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(hello, 0o644)
	}
	return dindSetup{flavour: f, layout: layout, hello: hello, docker: dockerCLI}
}

// hostCLI is sid's docker CLI with its Compose v2 and buildx plugins,
// copied out of the image once per test binary into the shared directory:
// the "current" client on the host, whatever the host has installed. It
// skips t when sid's image cannot be built or its CLI does not run here.
func hostCLI(t *testing.T) dindtest.CLI {
	t.Helper()
	layout := dindtest.Sid.Layout(t)
	cliOnce.Do(func() {
		cli, cliErr = dindtest.ExtractCLI(layout, filepath.Join(shared, "sid-cli"))
		if cliErr == nil {
			if out, err := exec.Command(cli.Docker, "--version").CombinedOutput(); err != nil {
				cliErr = fmt.Errorf("sid's docker CLI does not run on this host: %v %s", err, out)
			}
		}
	})
	if cliErr != nil {
		t.Skip(cliErr)
	}
	return cli
}

var (
	cliOnce sync.Once
	cli     dindtest.CLI
	cliErr  error
)

// daemon is one dockerd episode under rungv.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	log    *syncBuffer
	sock   string
	cli    string
	env    []string // extra environment of docker commands
	exited chan error

	tmp, vol string // startOnVolume's TMPDIR and volume
}

// startDaemon runs the dind image as u with TMPDIR tmp and
// /var/lib/docker mounted as mount (a --mount value), and waits until the
// daemon answers through the socket published in sockDir. No iptables or
// socket flags are given: rungv adds them for a dockerd-entrypoint.sh
// command. extra are more rungv run flags (before the image).
func startDaemon(t *testing.T, s dindSetup, u user, tmp, sockDir, mount string, extra ...string) *daemon {
	t.Helper()
	return startDaemonFiles(t, s, u, tmp, sockDir, mount, nil, extra...)
}

// startDaemonFiles is startDaemon with files passed to rungv from fd 3.
func startDaemonFiles(t *testing.T, s dindSetup, u user, tmp, sockDir, mount string, files []*os.File, extra ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, log: &syncBuffer{}, sock: filepath.Join(sockDir, "docker.sock"), cli: s.docker, exited: make(chan error, 1)}
	args := append([]string{"run", "--rm", "-p", "unix:" + d.sock + ":2375",
		"-e", "DOCKER_TLS_CERTDIR=", "--mount", mount}, extra...)
	d.cmd = command(t, u, tmp, append(args, "oci:"+s.layout, "--tls=false")...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.ExtraFiles = files
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) })
	for ; ; time.Sleep(100 * time.Millisecond) {
		// Bounded: a daemon that accepts the connection and never answers
		// (a restore that never completed) fails the test, not hangs it.
		if out, err := dockerWithin(d, "info", "--format", "{{.Driver}}"); err == nil {
			v, _ := d.docker("version", "--format", "server {{.Server.Version}} (API {{.Server.APIVersion}}), client {{.Client.Version}}")
			t.Logf("%s: dockerd answered %v after rungv started, storage driver %s; docker version: %s", s.flavour.Name, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out), strings.TrimSpace(v))
			return d
		}
		select {
		case err := <-d.exited:
			t.Fatalf("rungv exited before dockerd answered: %v\n%s", err, tail(d.log.String()))
		default:
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("dockerd did not answer in 90 s\n%s", tail(d.log.String()))
		}
	}
}

// startOnVolume is startDaemon as nobody with /var/lib/docker on a new
// 4 GiB ext4lite volume, driven by sid's CLI (hostCLI); finish stops it.
func startOnVolume(t *testing.T, s dindSetup, extra ...string) *daemon {
	t.Helper()
	cli := hostCLI(t)
	need(t, asNobody)
	tmp, sockDir := privateTmp(t, asNobody), privateTmp(t, asNobody)
	vol := newVolume(t, asNobody, 4<<30)
	d := startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+vol+",dst=/var/lib/docker", extra...)
	d.tmp, d.vol = tmp, vol
	d.use(cli)
	d.must("load", "-i", s.hello)
	return d
}

// finish stops d gracefully and checks that nothing is left behind and
// that its volume (startOnVolume) is e2fsck-clean.
func (d *daemon) finish() {
	d.t.Helper()
	d.stop()
	checkClean(d.t, d.tmp)
	e2fsck(d.t, d.vol)
}

// use makes d's docker commands use cli (and its plugins).
func (d *daemon) use(cli dindtest.CLI) {
	d.t.Helper()
	d.cli, d.env = cli.Docker, []string{"DOCKER_CONFIG=" + cli.Config}
	v := d.must("version", "--format", "client {{.Client.Version}}, server {{.Server.Version}}")
	d.t.Logf("docker version: %s", strings.TrimSpace(v))
}

func (d *daemon) docker(args ...string) (string, error) {
	c := boundedCommand(d.cli, append([]string{"-H", "unix://" + d.sock}, args...)...)
	c.Env = append(append(os.Environ(), "DOCKER_BUILDKIT=0"), d.env...)
	out, err := c.CombinedOutput()
	return string(out), err
}

func (d *daemon) must(args ...string) string {
	d.t.Helper()
	out, err := d.docker(args...)
	if err != nil {
		d.t.Fatalf("docker %v: %v\n%s\ndaemon:\n%s", args, err, out, tail(d.log.String()))
	}
	return out
}

// stop sends SIGTERM to rungv (it reaches dockerd, which shuts down) and
// waits for the episode to end.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("rungv did not stop on SIGTERM\n%s", tail(d.log.String()))
	}
}

// loadRunBuild is the dind workload: docker load of a local archive, docker
// run of it, a two-step docker build that deletes a file of its base
// layer, and a run of the result.
func loadRunBuild(t *testing.T, d *daemon, s dindSetup) {
	t.Helper()
	d.must("load", "-i", s.hello)
	if out := d.must("run", "--rm", "hello:latest", "echo", "hi"); strings.TrimSpace(out) != "hi" {
		t.Fatalf("docker run printed %q", out)
	}
	ctxDir := t.TempDir()
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM hello:latest\nRUN echo built >/built\nRUN rm /bin/true && cat /built\n"), 0o644)
	d.must("build", "-q", "-t", "built", ctxDir)
	if out := d.must("run", "--rm", "built", "sh", "-c", "cat /built; [ -e /bin/true ] || echo deleted"); strings.TrimSpace(out) != "built\ndeleted" {
		t.Fatalf("built image: %q", out)
	}
}

// TestDindThroughRungvRun: /var/lib/docker on tmpfs. From the host, docker
// info, load, run and a two-step build work, and a graceful stop leaves
// nothing behind.
func TestDindThroughRungvRun(t *testing.T) { forEachFlavour(t, testDindThroughRungvRun) }

func testDindThroughRungvRun(t *testing.T, s dindSetup) {
	tmp, sockDir := privateTmp(t, asRoot), privateTmp(t, asRoot)
	d := startDaemon(t, s, asRoot, tmp, sockDir, "type=tmpfs,dst=/var/lib/docker")
	loadRunBuild(t, d, s)
	d.stop()
	if left := processesMentioning(filepath.Dir(d.sock)); len(left) > 0 {
		t.Errorf("processes left after the stop: %v", left)
	}
}

// TestDindOnVolume is the seeds' episode, run as nobody: dockerd's whole
// /var/lib/docker on an ext4lite volume. After load, run and build, a
// graceful stop leaves the volume e2fsck-clean; a clone of it starts a new
// daemon that lists and runs the images without loading them again, and
// the clone is clean too.
func TestDindOnVolume(t *testing.T) { forEachFlavour(t, testDindOnVolume) }

func testDindOnVolume(t *testing.T, s dindSetup) {
	need(t, asNobody)
	tmp, sockDir := privateTmp(t, asNobody), privateTmp(t, asNobody)
	vol := newVolume(t, asNobody, 4<<30)
	d := startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+vol+",dst=/var/lib/docker")
	if out := d.must("info", "--format", "{{.Driver}}"); strings.TrimSpace(out) != "overlay2" {
		t.Fatalf("storage driver %q, want overlay2 (on the volume)", out)
	}
	loadRunBuild(t, d, s)
	d.stop()
	if !strings.Contains(d.log.String(), "Daemon shutdown complete") {
		t.Errorf("dockerd did not log a clean shutdown:\n%s", tail(d.log.String()))
	}
	checkClean(t, tmp)
	e2fsck(t, vol)

	clone := filepath.Join(filepath.Dir(vol), "clone.ext4")
	if _, err := reflink.CloneFile(vol, clone, reflink.Options{Mode: reflink.Auto}); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(clone, 65534, 65534)
	d = startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+clone+",dst=/var/lib/docker")
	if out := d.must("images", "--format", "{{.Repository}}:{{.Tag}}"); !strings.Contains(out, "hello:latest") || !strings.Contains(out, "built:latest") {
		t.Fatalf("images on the clone: %q", out)
	}
	if out := d.must("run", "--rm", "built", "cat", "/built"); strings.TrimSpace(out) != "built" {
		t.Fatalf("built image on the clone: %q", out)
	}
	d.stop()
	checkClean(t, tmp)
	e2fsck(t, clone)
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// TestDindCompose drives the episode's daemon with the host's docker-compose
// (Debian's 1.29, Compose v1, through the published socket): a web service
// and a client that fetches from it by name, through links on the default
// bridge, as a v1 project of old would. Compose creates its network and
// containers and the client gets the page. Compose v2 on user-defined
// networks: TestDindComposeProject.
func TestDindCompose(t *testing.T) {
	s := needDind(t, dindtest.Bookworm)
	compose, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("no docker-compose (apt-get install docker-compose)")
	}
	need(t, asNobody)
	tmp, sockDir := privateTmp(t, asNobody), privateTmp(t, asNobody)
	vol := newVolume(t, asNobody, 4<<30)
	d := startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+vol+",dst=/var/lib/docker")
	d.must("load", "-i", s.hello)
	proj := t.TempDir()
	yml := `version: "3"
services:
  web:
    image: hello:latest
    network_mode: bridge
    command: sh -c "mkdir -p /www && echo hello-from-web > /www/index.html && httpd -f -p 8080 -h /www"
  client:
    image: hello:latest
    network_mode: bridge
    links: [web]
    depends_on: [web]
    command: sh -c "for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O- http://web:8080/ && exit 0; sleep 0.5; done; exit 1"
`
	if err := os.WriteFile(filepath.Join(proj, "docker-compose.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		c := boundedCommand(compose, args...)
		c.Dir = proj
		c.Env = append(os.Environ(), "DOCKER_HOST=unix://"+d.sock, "COMPOSE_INTERACTIVE_NO_CLI=1")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("docker-compose %v: %v\n%s\ndaemon:\n%s", args, err, out, tail(d.log.String()))
		}
		return string(out)
	}
	out := run("up", "--no-color", "--abort-on-container-exit", "--exit-code-from", "client")
	if !strings.Contains(out, "hello-from-web") {
		t.Fatalf("the client did not get the web page:\n%s", out)
	}
	run("down")
	d.stop()
	checkClean(t, tmp)
	e2fsck(t, vol)
}

// syncBuffer is a strings.Builder that the daemon's output goroutines and
// the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
