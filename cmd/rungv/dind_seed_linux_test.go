package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDindSeedShellLine runs Docker inside as the seeds' Go example does:
// a privileged episode of the daemon image whose command is a shell line
// that starts dockerd-entrypoint.sh in the background, waits for it and
// runs a container. No flag in it says --iptables=false: rungv's dockerd
// shim (runtime.dockerdShim) must add what the Sentry needs, for each
// daemon flavour and in both isolation modes. (The wait is bounded here,
// unlike the seed's, so that a daemon that fails ends the test with its
// log.)
func TestDindSeedShellLine(t *testing.T) { forEachFlavour(t, testDindSeedShellLine) }

func testDindSeedShellLine(t *testing.T, s dindSetup) {
	need(t, asNobody)
	line := "dockerd-entrypoint.sh --tls=false >/var/log/dockerd.log 2>&1 & " +
		"i=0; until docker info >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 300 ] || { tail -5 /var/log/dockerd.log; exit 9; }; sleep 0.2; done && " +
		"docker load -i /in/hello.tar >/dev/null && docker run --rm hello:latest echo seed-ok"
	isolations(t, asNobody, func(t *testing.T, iso string) {
		tmp := privateTmp(t, asNobody)
		vol := newVolume(t, asNobody, 4<<30)
		args := []string{"run", "--isolation", iso, "-e", "DOCKER_TLS_CERTDIR=",
			"--mount", "type=volume,src=" + vol + ",dst=/var/lib/docker", "--entrypoint", "sh"}
		if iso == "namespaces" {
			args = append(args, "--mount", "type=bind,src="+filepath.Dir(s.hello)+",dst=/in,readonly")
		} else {
			// No bind mounts without a gofer: the archive comes on a
			// second volume.
			in := newVolume(t, asNobody, 256<<20)
			r := runRungv(t, asNobody, tmp, "", "run", "--network", "none", "--mount", "type=volume,src="+in+",dst=/in",
				"--mount", "type=bind,src="+filepath.Dir(s.hello)+",dst=/host,readonly", imageRef, "cp", "/host/hello.tar", "/in/")
			if r.code != 0 {
				t.Fatalf("copy the archive: %d %s", r.code, r.stderr)
			}
			args = append(args, "--mount", "type=volume,src="+in+",dst=/in,readonly")
		}
		args = append(args, "oci:"+s.layout, "-c", line)
		r := runRungv(t, asNobody, tmp, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "seed-ok") {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, tail(r.stderr))
		}
		checkClean(t, tmp)
		e2fsck(t, vol)
	})
}
