package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
)

// TestNestedDocker: Docker in a nested episode (issue 28), under an outer
// episode of either isolation. The outer runs rungv, which runs the
// bookworm dind image with /var/lib/docker on an inner ext4lite volume;
// the inner guest starts dockerd-entrypoint.sh, waits for `docker info`,
// loads the hello archive (dindtest.WriteHello) from its stdin and runs
// it: `docker run --rm hello:latest echo ok` must print ok, and dockerd
// must stop cleanly. Afterwards the outer and the inner volume are
// e2fsck-clean on the host. Without gVisor patch 0010-nested-stray-sigsys
// containerd died in Go's runtime.futexwakeup and dockerd never answered;
// without 0013-nested-keep-trap-table about one run in three under load
// never ended (a stub lost the outer's syscall trap table and died).
//
// The image layout (about 400 MB) and the hello archive reach the outer
// guest in the tar on its stdin (seccomp-only has no bind mounts), into
// its memory-backed root. The inner episode is seccomp-only either way
// (`auto` inside gVisor), so what Docker needs from the inner Sentry is
// the same; what differs is the outer kernel's side (systrap under a
// namespaces or a seccomp-only Sentry).
func TestNestedDocker(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0004-nested-fault-access")
	needPatch(t, "0010-nested-stray-sigsys")
	needPatch(t, "0013-nested-keep-trap-table")
	s := needDind(t, dindtest.Bookworm)
	dir := nestedDir(t)
	isolations(t, asRoot, func(t *testing.T, iso string) { nestedDocker(t, iso, dir, s) })
}

func nestedDocker(t *testing.T, isolation, dir string, s dindSetup) {
	outer := newVolume(t, asRoot, 8<<30)
	line := `dockerd-entrypoint.sh --tls=false >/var/log/dockerd.log 2>&1 & d=$!
start=$(date +%s)
until timeout 10 docker info >/dev/null 2>&1; do
	[ $(($(date +%s) - start)) -lt 240 ] || { echo "dockerd did not answer in 240 s"; tail -40 /var/log/dockerd.log; exit 9; }
	sleep 1
done
echo "== info"
docker info --format "{{.Driver}}"
echo "== run"
docker load >/dev/null || { echo "docker load: exit $?"; tail -30 /var/log/dockerd.log; exit 8; }
docker run --rm hello:latest echo ok || { echo "docker run: exit $?"; tail -30 /var/log/dockerd.log; exit 7; }
echo "== stop"
kill $d
wait $d
echo "dockerd exit $?"`
	// Every wait is bounded (nestedEnv's lim, the wait for docker info).
	script := `export GVX_CACHE_DIR=/v/gvx-cache
lim 420 rungv run --rm -e DOCKER_TLS_CERTDIR= --mount type=volume,src=/v/docker.ext4,dst=/var/lib/docker,size=4G \
	--entrypoint sh oci:/x/dind -c '` + line + `' < /x/` + filepath.Base(s.hello) + `
echo "== inner exit $?"
`
	// One tar: nestedDir's files, the layout (renamed dind in the guest)
	// and the hello archive.
	switch filepath.Base(s.layout) {
	case "rungv", "nestedprobe", "image", "dind", filepath.Base(s.hello):
		t.Fatalf("the layout %s has a name the outer guest's /x uses already", s.layout)
	}
	tarc := exec.Command("tar", "-cf", "-", "-C", dir, "rungv", "nestedprobe", "image",
		"-C", filepath.Dir(s.layout), filepath.Base(s.layout),
		"-C", filepath.Dir(s.hello), filepath.Base(s.hello))
	stdin, err := tarc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tarc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // a tar the outer stopped reading ends (EPIPE)
		tarc.Wait()
	}()
	tmp := privateTmp(t, asRoot)
	pre := "set -u; mkdir /x && tar -xf - -C /x && mv /x/" + filepath.Base(s.layout) + " /x/dind || exit 97\n" + nestedEnv
	r := runRungvFrom(t, asRoot, tmp, stdin, "run", "--rm", "--isolation", isolation,
		"--mount", "type=volume,src="+outer+",dst=/v",
		imageRef, "sh", "-c", pre+script)
	t.Logf("outer (%s): exit %d\n%s\n%s", isolation, r.code, r.stdout, tail(r.stderr))
	if r.code != 0 {
		t.Fatalf("outer episode: exit %d", r.code)
	}
	sections := outputSections(r.stdout)
	e2fsck(t, outer)
	e2fsck(t, innerVolume(t, outer, "docker.ext4"))
	if !strings.Contains(r.stdout, "== inner exit 0\n") {
		// Known open (issue 28), as in TestNestedEpisode: an inner
		// episode that does not end, or a Go daemon of the inner guest
		// (dockerd, containerd) that dies of a system call result or
		// fault that is not its own. Anything else fails.
		if why := nestedKnownOpen(r.stdout + r.stderr); why != "" {
			t.Skipf("known open (issue 28), the nested dockerd stopped: %s", why)
		}
		t.Fatalf("the inner episode failed (want \"inner exit 0\")")
	}
	if got := sections["info"]; len(got) != 1 || got[0] != "overlay2" {
		t.Errorf("inner docker info: storage driver %q, want overlay2 (on the inner volume)", got)
	}
	if got := sections["run"]; len(got) != 1 || got[0] != "ok" {
		t.Errorf("inner docker run --rm hello:latest echo ok printed %q, want ok", got)
	}
	if got := sections["stop"]; len(got) != 1 || got[0] != "dockerd exit 0" {
		t.Errorf("inner dockerd stop: %q, want \"dockerd exit 0\"", got)
	}
}
