package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/erofs/cache"
	"z.gfire.dev/gvx/image"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestRunLocalName: the busybox image, added to the cache from its OCI
// layout under the local name docker.io/library/docker:dind, runs as
// `rungv run --network none docker:dind` with every registry unreachable
// (HTTPS_PROXY and HTTP_PROXY point at a closed loopback port): the name
// resolves from the cache's index with no network. As nobody the cache is
// root's, which nobody may read but not write: the name still resolves.
// A name the cache does not know fails in the same setting, so the
// setting does stop registry traffic.
func TestRunLocalName(t *testing.T) {
	both(t, func(t *testing.T, u user) {
		tmp := privateTmp(t, u)
		c, err := cache.Open(filepath.Join(tmp, "cache")) // rungv's GVX_CACHE_DIR (command)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := image.Add(context.Background(), c, imageRef, image.Options{Tags: []string{"docker.io/library/docker:dind"}}); err != nil {
			t.Fatal(err)
		}
		proxy := "http://" + closedPort(t)
		run := func(ref string) result {
			c := command(t, u, tmp, "run", "--rm", "--network", "none", ref, "sh", "-c", "echo hi from $FROM_IMAGE")
			c.Env = append(c.Env, "HTTPS_PROXY="+proxy, "HTTP_PROXY="+proxy, "https_proxy="+proxy, "http_proxy="+proxy, "NO_PROXY=", "no_proxy=")
			var so, se strings.Builder
			c.Stdout, c.Stderr = &so, &se
			if err := c.Run(); err != nil && c.ProcessState == nil {
				t.Fatalf("rungv run %s: %v", ref, err)
			}
			return result{so.String(), se.String(), c.ProcessState.ExitCode()}
		}
		if r := run("docker:dind"); r.code != 0 || r.stdout != "hi from yes\n" {
			t.Fatalf("rungv run docker:dind: exit %d, %q, stderr:\n%s", r.code, r.stdout, r.stderr)
		}
		r := run("docker:rootless")
		t.Logf("unknown name: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
		if r.code == 0 || !strings.Contains(r.stderr, "proxyconnect") {
			t.Errorf("an unknown name with the registry unreachable: exit %d, stderr:\n%s", r.code, r.stderr)
		}
		checkClean(t, tmp)
	})
}
