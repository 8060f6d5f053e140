package goldencmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/golden"
	"z.gfire.dev/gvx/image/dindtest"
)

// nobody runs gvx-vol in TestBuildGoldenDind, as the seeds' workflow does
// (no root needed to build a golden volume).
var nobody = []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}

// buildBinaries builds rungv and gvx-vol
// into a directory nobody may read.
func buildBinaries(t *testing.T) (rungv, gvxVol string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "gvx-goldencmd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := exec.Command("go", "build", "-o", dir+"/", "z.gfire.dev/gvx/cmd/rungv", "z.gfire.dev/gvx/cmd/gvx-vol")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build rungv gvx-vol: %v\n%s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "rungv"), filepath.Join(dir, "gvx-vol")
}

// TestBuildGoldenDind: `gvx-vol build-golden` as nobody, with the Debian
// docker.io image of package dindtest as the daemon image (shaped like
// docker:dind: entrypoint dockerd-entrypoint.sh, no extra env) and no
// --daemon-arg, produces a golden volume holding the loaded hello image:
// the summary lists it, the file is nobody's and e2fsck-clean, nothing is
// left beside it. (Without the flags rungv run adds, dockerd would exit on
// "MASQUERADE revision 0 not supported".) The library test
// (golden.TestBuildDind) checks such a volume with the host's dockerd.
func TestBuildGoldenDind(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the dind image is built by debootstrap")
	}
	for _, tool := range []string{"setpriv", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing", tool)
		}
	}
	if out, err := exec.Command(nobody[0], append(nobody[1:], "unshare", "-Urn", "true")...).CombinedOutput(); err != nil {
		t.Skipf("unprivileged user namespaces are not available to nobody here: %v %s", err, out)
	}
	layoutDir := dindtest.Layout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rungvBin, gvxVol := buildBinaries(t)

	// A directory nobody can reach (t.TempDir's parents are private).
	work, err := os.MkdirTemp("/var/tmp", "gvx-golden-dind-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	outDir, tmp := filepath.Join(work, "out"), filepath.Join(work, "tmp")
	for _, d := range []string{outDir, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	hello := filepath.Join(work, "hello.tar")
	if err := dindtest.WriteHello(hello); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(hello, 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(outDir, "golden.ext4")
	args := append(append([]string{}, nobody[1:]...), gvxVol, "build-golden", "--rungv", rungvBin,
		"--daemon-image", "oci:"+layoutDir, "--load", hello,
		"--ready-timeout", "60s", "--timeout", "5m", "--size", "2G", "--json", out)
	cmd := exec.CommandContext(ctx, nobody[0], args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+filepath.Join(tmp, "cache"),
		"HOME="+tmp, "DOCKER_CONFIG="+filepath.Join(tmp, "docker"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("gvx-vol build-golden as nobody: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("build-golden as nobody: %.1fs\n%s", time.Since(start).Seconds(), stderr.String())

	var sum golden.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	t.Logf("summary: %s", stdout.String())
	if len(sum.Images) != 1 || sum.Images[0].Ref != dindtest.HelloTag || !strings.HasPrefix(sum.Images[0].ID, "sha256:") ||
		sum.UsedBytes <= 0 || sum.AllocatedBytes <= 0 || sum.Volume != out {
		t.Errorf("summary %+v", sum)
	}
	if fi, err := os.Stat(out); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("golden volume: %v (want it owned by nobody)", err)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 1 {
		t.Errorf("left next to OUT: %v", ents)
	}
	if out, err := exec.Command("e2fsck", "-fn", out).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn: %v\n%s", err, out)
	}
}
