package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/image/dindtest"
)

// TestDindThroughRungvRun runs the Debian docker.io image under plain
// `rungv run` with /var/lib/docker on tmpfs and the daemon's port
// published as a host unix socket: from the host, docker info, load, run
// and a two-step build work, and a graceful stop leaves nothing behind.
func TestDindThroughRungvRun(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	layout, err := dindtest.Build(ctx, "")
	if dindtest.IsUnavailable(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	hello := filepath.Join(tmp, "hello.tar")
	if err := dindtest.WriteHello(hello); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(tmp, "sock")
	os.Mkdir(sockDir, 0o755)
	sock := filepath.Join(sockDir, "docker.sock")
	cmd := exec.Command(rungvBin, "run", "--rm", "-p", "unix:"+sock+":2375",
		"-e", "DOCKER_TLS_CERTDIR=", "-e", "DOCKERD_EXTRA_FLAGS=--iptables=false --ip6tables=false",
		"--mount", "type=tmpfs,dst=/var/lib/docker", "oci:"+layout, "--tls=false")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	docker := func(args ...string) (string, error) {
		out, err := exec.Command(dockerCLI, append([]string{"-H", "unix://" + sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := docker(args...)
		if err != nil {
			t.Fatalf("docker %v: %v\n%s\ndaemon:\n%s", args, err, out, tail(log.String()))
		}
		return out
	}
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		if out, err := docker("info", "--format", "{{.Driver}}"); err == nil {
			t.Logf("dockerd answered after %v, storage driver %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("rungv exited before dockerd answered: %v\n%s", err, tail(log.String()))
		default:
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("dockerd did not answer in 90 s\n%s", tail(log.String()))
		}
	}
	must("load", "-i", hello)
	if out := must("run", "--rm", "hello:latest", "echo", "hi"); strings.TrimSpace(out) != "hi" {
		t.Fatalf("docker run printed %q", out)
	}
	ctxDir := filepath.Join(tmp, "build")
	os.Mkdir(ctxDir, 0o755)
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM hello:latest\nRUN echo built >/built\nRUN cat /built\n"), 0o644)
	must("build", "-q", "-t", "built", ctxDir)
	if out := must("run", "--rm", "built", "cat", "/built"); strings.TrimSpace(out) != "built" {
		t.Fatalf("built image: %q", out)
	}
	// Graceful stop: SIGTERM to rungv reaches dockerd, which shuts down.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("rungv did not stop on SIGTERM\n%s", tail(log.String()))
	}
	if left := processesMentioning(sockDir); len(left) > 0 {
		t.Errorf("processes left after the stop: %v", left)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
