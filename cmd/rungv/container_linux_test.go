package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image/dindtest"
)

// rungv where RL fleets run it: in a container with the security context
// of a restricted Kubernetes pod (non-root, every capability dropped,
// no_new_privs, a read-only root, Docker's default seccomp profile, no
// network), which is what such a pod gets from its runtime. The host's
// own dockerd (Debian's docker.io) runs the container; rungv must find by
// itself that it has no user namespace and no fresh /proc there, and
// still run images, volumes, published ports and a Docker daemon.

// hostDockerd is a dockerd of the test's own, with its own data root.
type hostDockerd struct {
	t    *testing.T
	dir  string
	sock string
	cmd  *exec.Cmd
	log  *strings.Builder
	cli  string
}

// startHostDockerd starts dockerd (vfs storage, no bridge, no iptables:
// the test's containers use --network none) and waits until it answers.
func startHostDockerd(t *testing.T) *hostDockerd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting a host dockerd needs root (CI runs as root)")
	}
	for _, b := range []string{"dockerd", "containerd", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is missing (apt-get install docker.io)", b)
		}
	}
	cli := "/usr/bin/docker"
	if _, err := os.Stat(cli); err != nil {
		p, err := exec.LookPath("docker")
		if err != nil {
			t.Skip("no docker CLI (apt-get install docker.io)")
		}
		cli = p
	}
	// Short: containerd's socket paths must fit a sockaddr_un.
	dir, err := os.MkdirTemp("/var/tmp", "gvxk")
	if err != nil {
		t.Fatal(err)
	}
	d := &hostDockerd{t: t, dir: dir, sock: filepath.Join(dir, "d.sock"), log: &strings.Builder{}, cli: cli}
	cfg := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(cfg, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("dockerd", "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "x"),
		"-H", "unix://"+d.sock, "--pidfile", filepath.Join(dir, "pid"), "--config-file", cfg,
		"--storage-driver", "vfs", "--iptables=false", "--ip6tables=false", "--bridge=none")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		// vfs layers may hold read-only dirs; containers are gone.
		exec.Command("rm", "-rf", dir).Run()
	})
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := d.docker("version", "--format", "{{.Server.Version}}"); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("dockerd exited at start:\n%s", tail(d.log.String()))
		default:
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("dockerd did not answer in 60 s:\n%s", tail(d.log.String()))
		}
	}
	return d
}

func (d *hostDockerd) docker(args ...string) (string, error) {
	c := boundedCommand(d.cli, append([]string{"-H", "unix://" + d.sock}, args...)...)
	c.Env = append(os.Environ(), "DOCKER_CONFIG="+filepath.Join(d.dir, "cli"))
	out, err := c.CombinedOutput()
	return string(out), err
}

func (d *hostDockerd) must(args ...string) string {
	d.t.Helper()
	out, err := d.docker(args...)
	if err != nil {
		d.t.Fatalf("docker %v: %v\n%s\ndockerd:\n%s", args, err, out, tail(d.log.String()))
	}
	return out
}

// importRungvImage builds the image the Kubernetes manifests run, with
// their own script (deploy/kubernetes/build-image.sh), into this daemon.
func (d *hostDockerd) importRungvImage() string {
	d.t.Helper()
	if _, err := exec.LookPath("busybox"); err != nil {
		d.t.Skip("busybox (busybox-static) is missing")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	tag := "gvx-rungv-test:" + hex.EncodeToString(rnd[:])
	c := exec.Command("bash", "../../deploy/kubernetes/build-image.sh", tag)
	c.Env = append(os.Environ(), "DOCKER_HOST=unix://"+d.sock, "DOCKER_CONFIG="+filepath.Join(d.dir, "cli"), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		d.t.Fatalf("build-image.sh: %v\n%s", err, out)
	}
	return tag
}

// restricted is docker run's security context of a restricted pod.
var restricted = []string{"--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
	"--read-only", "--tmpfs", "/tmp", "--network", "none"}

// TestRestrictedContainer runs rungv inside a container with the
// restricted pod's security context: busybox runs with its exit code, a
// volume is written and read back on the host, a guest port is answered
// through a unix socket in a bind-mounted directory, and a Docker daemon
// episode on a volume answers docker info and runs an image (when the
// dind test image can be built here).
func TestRestrictedContainer(t *testing.T) {
	need(t, asRoot)
	d := startHostDockerd(t)
	img := d.importRungvImage()
	// The node volume of the pod: golden, scratch, the image cache (it
	// must allow exec: the Sentry maps the image's programs from it).
	node, err := os.MkdirTemp("/var/tmp", "gvx-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(node) })
	if err := os.Chown(node, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	// The busybox layout, copied in as an operator would.
	if out, err := exec.Command("cp", "-a", strings.TrimPrefix(imageRef, "oci:"), filepath.Join(node, "bb")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	exec.Command("chown", "-R", "1000:1000", node).Run()
	run := func(extra []string, args ...string) (string, error) {
		a := append([]string{"run", "--rm"}, restricted...)
		a = append(a, "-v", node+":/srv/gvx")
		a = append(a, extra...)
		a = append(a, img)
		return d.docker(append(a, args...)...)
	}

	t.Run("busybox", func(t *testing.T) {
		out, err := run(nil, "/rungv", "run", "--json", "oci:/srv/gvx/bb", "sh", "-c", "echo in-container; exit 3")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(out, "in-container") || !strings.Contains(out, `"isolation":"seccomp-only"`) {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})

	t.Run("info and insisting on namespaces", func(t *testing.T) {
		out, err := run(nil, "/rungv", "info", "--json")
		if err != nil || !strings.Contains(out, `"mode": "seccomp-only"`) || !strings.Contains(out, `"user_namespaces": false`) {
			t.Fatalf("rungv info: %v\n%s", err, out)
		}
		out, err = run(nil, "/rungv", "run", "--isolation", "namespaces", "oci:/srv/gvx/bb", "true")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out, "user namespace") || !strings.Contains(out, "seccomp-only") {
			t.Fatalf("--isolation namespaces: %v\n%s", err, out)
		}
	})

	t.Run("noexec cache refused", func(t *testing.T) {
		// --tmpfs /tmp is noexec: a cache there would kill every guest
		// program at its first instruction; rungv says so and what to do.
		out, err := run([]string{"-e", "GVX_CACHE=/tmp/cache"}, "/rungv", "run", "oci:/srv/gvx/bb", "true")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out, "noexec") || !strings.Contains(out, "GVX_CACHE") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})

	t.Run("volume", func(t *testing.T) {
		out, err := run(nil, "/rungv", "run", "--network", "none", "--mount", "type=volume,src=/srv/gvx/v.ext4,dst=/data,size=1G",
			"oci:/srv/gvx/bb", "sh", "-c", "dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null && md5sum /data/big")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		vol := filepath.Join(node, "v.ext4")
		e2fsck(t, vol)
		if sum := volumeMD5(t, vol, "big"); !strings.Contains(out, sum) {
			t.Fatalf("md5 on the host %s; the guest printed:\n%s", sum, out)
		}
	})

	t.Run("publish", func(t *testing.T) {
		name := "gvx-pub-" + filepath.Base(node)
		out, err := run([]string{"-d", "--name", name}, "/rungv", "run", "--network", "none", "-p", "unix:/srv/gvx/web.sock:8080",
			"oci:/srv/gvx/bb", "sh", "-c", "mkdir /w && echo published > /w/i && httpd -f -p 127.0.0.1:8080 -h /w")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Cleanup(func() { d.docker("rm", "-f", name) })
		sock := filepath.Join(node, "web.sock")
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return net.Dial("unix", sock)
		}}}
		var body []byte
		for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			resp, err := hc.Get("http://guest/i")
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				break
			}
			if time.Since(start) > 30*time.Second {
				logs, _ := d.docker("logs", name)
				t.Fatalf("no answer on %s: %v\n%s", sock, err, logs)
			}
		}
		if string(body) != "published\n" {
			t.Fatalf("answer %q", body)
		}
		d.must("stop", "-t", "10", name)
	})

	t.Run("ptrace refused", func(t *testing.T) {
		// A runtime whose seccomp profile refuses ptrace (as Yama's
		// ptrace_scope 2 would): rungv says why and what to change.
		prof := filepath.Join(d.dir, "no-ptrace.json")
		if err := os.WriteFile(prof, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ptrace"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run([]string{"--security-opt", "seccomp=" + prof}, "/rungv", "run", "oci:/srv/gvx/bb", "true")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out, "ptrace") || !strings.Contains(out, "ptrace_scope") {
			t.Fatalf("err %v, output:\n%s", err, out)
		}
	})

	t.Run("pool", func(t *testing.T) {
		golden := filepath.Join(node, "golden.ext4")
		v, err := ext4lite.Create(golden, 256<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(golden, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(node, "eps"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(node, "eps"), 1000, 1000)
		out, err := run(nil, "/rungv", "pool", "--golden", "/srv/gvx/golden.ext4", "--scratch", "/srv/gvx/eps", "-n", "3", "-j", "3",
			"--clone", "auto", "--network", "none", "--json", "oci:/srv/gvx/bb", "sh", "-c", "echo $GVX_EPISODE > /var/lib/docker/me && cat /var/lib/docker/me")
		if err != nil || strings.Count(strings.ReplaceAll(out, " ", ""), `"exit_code":0`) != 3 {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	t.Run("dockerd", func(t *testing.T) {
		s := needDind(t, dindtest.Bookworm)
		name := "gvx-dind-" + filepath.Base(node)
		out, err := run([]string{"-d", "--name", name, "-v", s.layout + ":/srv/gvx/dind:ro"}, "/rungv", "run", "-p", "unix:/srv/gvx/docker.sock:2375",
			"-e", "DOCKER_TLS_CERTDIR=", "--mount", "type=volume,src=/srv/gvx/docker.ext4,dst=/var/lib/docker,size=4G", "oci:/srv/gvx/dind", "--tls=false")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Cleanup(func() { d.docker("rm", "-f", name) })
		inner := &daemon{t: t, sock: filepath.Join(node, "docker.sock"), cli: s.docker, log: &syncBuffer{}}
		for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
			if out, err := inner.docker("info", "--format", "{{.ServerVersion}} {{.Driver}}"); err == nil {
				t.Logf("dockerd in rungv in a restricted container: %s, after %v", strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))
				break
			}
			if time.Since(start) > 90*time.Second {
				logs, _ := d.docker("logs", name)
				t.Fatalf("the episode's dockerd did not answer:\n%s", tail(logs))
			}
		}
		inner.must("load", "-i", s.hello)
		if out := inner.must("run", "--rm", "hello:latest", "echo", "hi"); strings.TrimSpace(out) != "hi" {
			t.Fatalf("docker run printed %q", out)
		}
		d.must("stop", "-t", "30", name)
		e2fsck(t, filepath.Join(node, "docker.ext4"))
	})
}
