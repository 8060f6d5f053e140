package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/image/dindtest"
	"z.gfire.dev/gvx/reflink"
)

// TestDindGoldenPipeline is the seeds' pipeline with today's daemon (sid's
// Docker 28), as nobody: gvx-vol build-golden loads the hello image into a
// golden volume with the sid image as the daemon; a reflink clone of it is
// an episode's /var/lib/docker with --network none, and the episode's
// daemon lists and runs the preloaded image with no load and no network.
// The golden volume is unchanged, the clone e2fsck-clean. (Bookworm's
// daemon runs this pipeline in pkg/gvx's TestPoolDocker and goldencmd's
// TestBuildGoldenDind.)
func TestDindGoldenPipeline(t *testing.T) {
	s := needDind(t, dindtest.Sid)
	need(t, asNobody)
	gvxVol := filepath.Join(shared, "gvx-vol")
	if _, err := os.Stat(gvxVol); err != nil {
		c := exec.Command("go", "build", "-o", shared+"/", "z.gfire.dev/gvx/cmd/gvx-vol")
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build gvx-vol: %v\n%s", err, out)
		}
	}
	tmp, sockDir, out := privateTmp(t, asNobody), privateTmp(t, asNobody), privateTmp(t, asNobody)
	golden := filepath.Join(out, "golden.ext4")
	build := exec.Command(asNobody.wrap[0], append(append([]string{}, asNobody.wrap[1:]...), gvxVol, "build-golden", "--rungv", rungvBin,
		"--daemon-image", "oci:"+s.layout, "--load", s.hello,
		"--daemon-arg=--iptables=false", "--daemon-arg=--ip6tables=false",
		"--ready-timeout", "90s", "--timeout", "5m", "--size", "2G", "--json", golden)...)
	build.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"), "HOME="+tmp)
	if bout, err := build.CombinedOutput(); err != nil {
		t.Fatalf("gvx-vol build-golden: %v\n%s", err, bout)
	}
	sum := fileDigest(t, golden)

	clone := filepath.Join(out, "episode.ext4")
	if _, err := reflink.CloneFile(golden, clone, reflink.Options{Mode: reflink.Auto}); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(clone, 65534, 65534)
	d := startDaemon(t, s, asNobody, tmp, sockDir, "type=volume,src="+clone+",dst=/var/lib/docker", "--network", "none")
	if ls := d.must("images", "--format", "{{.Repository}}:{{.Tag}}"); !strings.Contains(ls, dindtest.HelloTag) {
		t.Fatalf("the clone's daemon lists %q, want %s", ls, dindtest.HelloTag)
	}
	if got := d.must("run", "--rm", "--network=none", dindtest.HelloTag, "echo", "preloaded"); strings.TrimSpace(got) != "preloaded" {
		t.Fatalf("docker run of the preloaded image: %q", got)
	}
	d.stop()
	checkClean(t, tmp)
	e2fsck(t, clone)
	if fileDigest(t, golden) != sum {
		t.Error("the golden volume changed")
	}
}

// fileDigest is the hex sha256 of the file at p.
func fileDigest(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
