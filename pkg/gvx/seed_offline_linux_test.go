package gvx_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/runtime/runtimetest"
)

// The stand-in daemon image for TestSeedConfigOffline: a busybox whose
// dockerd-entrypoint.sh and docker CLI record what the seed's command
// line asks of them, on the episode's volume and on standard output.
const (
	seedStandInDaemon = `#!/bin/sh
echo "dockerd-entrypoint.sh $*" >/var/lib/docker/seed-daemon
touch /run/docker-up
exec sleep 600
`
	seedStandInDocker = `#!/bin/sh
case "$1" in
info) [ -e /run/docker-up ] ;;
run) echo "docker $*"; echo "DOCKER_TLS_CERTDIR=[$DOCKER_TLS_CERTDIR]"; cat /var/lib/docker/seed-daemon ;;
*) echo "stand-in docker: $1 is not supported" >&2; exit 1 ;;
esac
`
)

// TestSeedConfigOffline: the seed's gvx.Config (testdata/seed_example.go.txt,
// field for field: OCIImage "docker:dind", NAT, the sh -c entrypoint and
// its command line, DOCKER_TLS_CERTDIR=, the episode volume at
// /var/lib/docker, 4 GiB and 2 CPUs) runs with docker:dind tagged in the
// image cache and every registry unreachable (HTTPS_PROXY and HTTP_PROXY
// point at a closed loopback port): the name resolves from the cache, and
// the guest runs the seed's command against the image's daemon and docker
// CLI. The daemon here is a stand-in that records its flags: the real
// dockerd started from a shell line, as the seed does, gets no
// --iptables=false from rungv (docs/dind.md) — that is the runtime's
// matter, not the image name's. Without the tag the same Config fails on
// the unreachable registry.
func TestSeedConfigOffline(t *testing.T) {
	need(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: the seed's 4 GiB / 2 CPU limits need a host cgroup")
	}
	work := t.TempDir()
	cacheDir := filepath.Join(work, "cache")
	t.Setenv("GVX_CACHE_DIR", cacheDir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := "http://" + l.Addr().String()
	l.Close()
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		t.Setenv(k, proxy)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	epExt4 := filepath.Join(work, "ep-0001.ext4")
	seedConfig := func(stdout, stderr *bytes.Buffer) gvx.Config {
		return gvx.Config{
			Platform:               gvx.PlatformAuto,
			NetworkMode:            gvx.NetModeNAT,
			NetRaw:                 true,
			AllowPacketSocketWrite: true,
			AllowSUID:              true,
			OCIImage:               "docker:dind",
			Entrypoint:             []string{"sh", "-c"},
			EntrypointSet:          true,
			Cmd: []string{
				"dockerd-entrypoint.sh --tls=false >/var/log/dockerd.log 2>&1 & " +
					"until docker info >/dev/null 2>&1; do sleep 0.2; done && " +
					"docker run --rm python:3.11-slim python -c 'print(6 * 7)'",
			},
			Envv: []string{"DOCKER_TLS_CERTDIR="},
			Mounts: []gvx.Mount{
				{
					Kind:      gvx.MountVolume,
					ImagePath: epExt4,
					GuestPath: "/var/lib/docker",
				},
			},
			Resources: gvx.Resources{
				MemoryBytes: 4 << 30,
				CPUMillis:   2000,
			},
			Stdout: stdout,
			Stderr: stderr,
			Rungv:  rungvBin, // the seed finds it on PATH
		}
	}
	run := func() (int, string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the seed's timeout
		defer cancel()
		var stdout, stderr bytes.Buffer
		sb, err := gvx.New(ctx, seedConfig(&stdout, &stderr))
		if err != nil {
			return 0, "", "", err
		}
		defer sb.Close()
		code, err := sb.Run(ctx)
		return code, stdout.String(), stderr.String(), err
	}

	// Without the name in the cache: the registry is tried, and is not there.
	if code, _, stderr, err := run(); err == nil && code == 0 || !strings.Contains(stderr+errString(err), "proxyconnect") {
		t.Fatalf("docker:dind not in the cache: exit %d, %v, stderr:\n%s", code, err, stderr)
	}

	img := filepath.Join(work, "standin")
	if err := runtimetest.Busybox(img, v1.Config{Entrypoint: []string{"dockerd-entrypoint.sh"}, Env: []string{"PATH=/usr/local/bin:/bin"}},
		runtimetest.File{Path: "usr/local/bin/dockerd-entrypoint.sh", Mode: 0o755, Body: seedStandInDaemon},
		runtimetest.File{Path: "usr/local/bin/docker", Mode: 0o755, Body: seedStandInDocker},
		runtimetest.File{Path: "var/log/.keep", Mode: 0o644}, runtimetest.File{Path: "run/.keep", Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.Add(context.Background(), c, "oci:"+img, image.Options{Tags: []string{"docker:dind"}}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr, err := run()
	if err != nil || code != 0 {
		t.Fatalf("the seed's Config with docker:dind tagged: exit %d, %v, stderr:\n%s", code, err, stderr)
	}
	want := "docker run --rm python:3.11-slim python -c print(6 * 7)\nDOCKER_TLS_CERTDIR=[]\ndockerd-entrypoint.sh --tls=false\n"
	if stdout != want {
		t.Errorf("guest output %q, want %q", stdout, want)
	}
	v, err := ext4lite.Open(epExt4, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Open("seed-daemon"); err != nil {
		t.Errorf("the daemon's record is not on the episode volume: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
