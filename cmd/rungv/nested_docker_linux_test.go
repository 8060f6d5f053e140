package main

import (
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
)

// TestNestedDocker: Docker in a nested episode (issue 28). An outer
// episode (namespaces isolation) runs rungv, which runs the bookworm dind
// image with /var/lib/docker on an inner ext4lite volume; the inner guest
// starts dockerd-entrypoint.sh, waits for `docker info`, loads the hello
// archive (dindtest.WriteHello) from its stdin and runs it: `docker run
// --rm hello:latest echo ok` must print ok, and dockerd must stop cleanly.
// Afterwards the outer and the inner volume are e2fsck-clean on the host.
// Without gVisor patch 0010-nested-stray-sigsys containerd died in Go's
// runtime.futexwakeup and dockerd never answered.
//
// The outer is namespaces, not seccomp-only, because that mode has bind
// mounts: the image layout (about 400 MB) and the hello archive reach the
// outer guest read-only through the gofer, with no copy. The inner episode
// is seccomp-only either way (`auto` inside gVisor), so what Docker needs
// from the inner Sentry is the same.
func TestNestedDocker(t *testing.T) {
	need(t, asRoot)
	needPatch(t, "0004-nested-fault-access")
	needPatch(t, "0010-nested-stray-sigsys")
	s := needDind(t, dindtest.Bookworm)
	tar := nestedTar(t)
	outer := newVolume(t, asRoot, 8<<30)
	line := `dockerd-entrypoint.sh --tls=false >/var/log/dockerd.log 2>&1 & d=$!
i=0
until timeout 10 docker info >/dev/null 2>&1; do
	i=$((i+1)); [ $i -lt 120 ] || { echo "dockerd did not answer"; tail -40 /var/log/dockerd.log; exit 9; }
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
	script := `export GVX_CACHE_DIR=/v/gvx-cache
rungv run --rm -e DOCKER_TLS_CERTDIR= --mount type=volume,src=/v/docker.ext4,dst=/var/lib/docker,size=4G \
	--entrypoint sh oci:/dind -c '` + line + `' < /in/` + filepath.Base(s.hello) + `
echo "== inner exit $?"
`
	tmp := privateTmp(t, asRoot)
	pre := "set -u; mkdir /x && tar -xf - -C /x || exit 97\nexport TMPDIR=/tmp GVX_CACHE_DIR=/tmp/gvx-cache PATH=/bin:/x; cd /tmp\n"
	r := runRungv(t, asRoot, tmp, tar, "run", "--rm", "--isolation", "namespaces",
		"--mount", "type=volume,src="+outer+",dst=/v",
		"--mount", "type=bind,src="+s.layout+",dst=/dind,readonly",
		"--mount", "type=bind,src="+filepath.Dir(s.hello)+",dst=/in,readonly",
		imageRef, "sh", "-c", pre+script)
	t.Logf("outer: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr))
	if r.code != 0 {
		t.Fatalf("outer episode: exit %d", r.code)
	}
	sections := outputSections(r.stdout)
	if !strings.Contains(r.stdout, "== inner exit 0\n") {
		t.Errorf("the inner episode failed (want \"inner exit 0\")")
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
	e2fsck(t, outer)
	e2fsck(t, innerVolume(t, outer, "docker.ext4"))
}
