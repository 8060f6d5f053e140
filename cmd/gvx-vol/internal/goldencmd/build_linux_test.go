package goldencmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/runtime/runtimetest"
)

var (
	rungvBin string
	standIn  string // the stand-in daemon image
	setupErr error
)

// The stand-in daemon image: busybox with a dockerd-entrypoint.sh and a
// docker CLI written in shell. It exercises everything build-golden does
// on the host (volume, runtime, bind mounts, guest protocol, graceful
// stop, compaction, atomic publish) with the real rungv; the real Docker
// daemon is TestBuildGoldenDind's.
const standInDaemon = `#!/bin/sh
mkdir -p /var/lib/docker/image /run
trap 'echo clean > /var/lib/docker/shutdown; rm -f /run/up; exit 0' TERM
echo "$@" > /var/lib/docker/args
touch /run/up
while :; do sleep 0.05; done
`

const standInDocker = `#!/bin/sh
case "$1" in
info) [ -e /run/up ] ;;
load)
	f=$3
	case "$f" in *bad.tar) echo "open $f: invalid tar header" >&2; exit 1 ;; esac
	if m=$(tar -xOf "$f" manifest.json 2>/dev/null); then
		# a docker-archive (a --pull): its tag and config digest
		n=$(echo "$m" | sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p')
		echo "$n $(echo "$m" | sed -n 's/.*"Config":"\([^"]*\)".*/\1/p') <none> 2kB" >>/var/lib/docker/images
	else
		n=$(basename "$f" .tar):latest
		echo "$n sha256:$(sha256sum "$f" | cut -d' ' -f1) <none> 1kB" >>/var/lib/docker/images
	fi
	cp "$f" /var/lib/docker/image/
	echo "Loaded image: $n" ;;
image) while read -r l; do echo "GVX-IMAGE $l"; done </var/lib/docker/images ;;
*) echo "stand-in docker: $1 is not supported" >&2; exit 1 ;;
esac
`

var (
	setupOnce sync.Once
	setupDir  string
)

// TestMain removes what setup built. Setup runs on the first need, not
// here: fuzzing workers run this binary too and need no rungv.
func TestMain(m *testing.M) {
	code := m.Run()
	if setupDir != "" {
		os.RemoveAll(setupDir)
	}
	os.Exit(code)
}

func setup() {
	dir, err := os.MkdirTemp("", "gvx-golden-test-")
	if err != nil {
		setupErr = err
		return
	}
	setupDir = dir
	rungvBin = filepath.Join(dir, "rungv")
	build := exec.Command("go", "build", "-o", rungvBin, "z.gfire.dev/gvx/cmd/rungv")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		setupErr = fmt.Errorf("go build rungv: %v\n%s", err, out)
		return
	}
	img := filepath.Join(dir, "standin")
	setupErr = runtimetest.Busybox(img, v1.Config{Env: []string{"PATH=/usr/local/bin:/bin"}},
		runtimetest.File{Path: "usr/local/bin/dockerd-entrypoint.sh", Mode: 0o755, Body: standInDaemon},
		runtimetest.File{Path: "usr/local/bin/docker", Mode: 0o755, Body: standInDocker})
	standIn = "oci:" + img
}

func need(t *testing.T) {
	t.Helper()
	setupOnce.Do(setup)
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	if os.Getuid() != 0 {
		if out, err := exec.Command("unshare", "-Urn", "true").CombinedOutput(); err != nil {
			t.Skipf("no user namespaces for a rootless sandbox here: %v %s", err, out)
		}
	}
	t.Setenv("GVX_CACHE_DIR", t.TempDir())
	t.Setenv("TMPDIR", t.TempDir())
}

// runCLI runs "gvx-vol build-golden ARGS..." in-process and returns its
// stdout, stderr and error.
func runCLI(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	app := &cli.App{Name: "gvx-vol", Commands: Commands(), Writer: &out, ErrWriter: &errb,
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"gvx-vol", "build-golden"}, args...))
	return out.String(), errb.String(), err
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func TestBuildGoldenPipeline(t *testing.T) {
	need(t)
	dir := t.TempDir()
	tars := t.TempDir()
	a, b := filepath.Join(tars, "alpha.tar"), filepath.Join(dir, "beta.tar") // two directories: two bind mounts
	bodyA, bodyB := bytes.Repeat([]byte("alpha"), 50000), []byte("beta\n")
	for p, body := range map[string][]byte{a: bodyA, b: bodyB} {
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := testRegistry(t)
	ref := reg + "/gvx/pulled:v1"
	img := withPlatform(t, randomImage(t, 2), "linux", runtime.GOARCH)
	push(t, ref, img)
	id, _ := img.ConfigName()
	dg, _ := img.Digest()

	out := filepath.Join(dir, "golden.ext4")
	stdout, stderr, err := runCLI("--rungv", rungvBin, "--daemon-image", standIn, "--load", a, "--load", b, "--pull", ref,
		"--daemon-arg=--iptables=false", "--size", "256M", "--timeout", "2m", "--json", out)
	if err != nil {
		t.Fatalf("build-golden: %v\nstderr:\n%s", err, stderr)
	}
	for _, want := range []string{"pull " + ref + ": 2 layers, ", "daemon ready in", "load /gvx-golden/load/0/alpha.tar", "Loaded image: beta:latest", "Loaded image: " + ref, "daemon stopped (status 0)", "compacting"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	var sum Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	want := []Image{{Ref: "alpha:latest", ID: "sha256:" + sha(bodyA), Size: "1kB"}, {Ref: "beta:latest", ID: "sha256:" + sha(bodyB), Size: "1kB"},
		{Ref: ref, ID: id.String(), Digest: dg.String(), Size: "2kB"}}
	if fmt.Sprint(sum.Images) != fmt.Sprint(want) || sum.Volume != out || sum.SizeBytes != 256<<20 {
		t.Errorf("summary %+v, want images %+v", sum, want)
	}
	if sum.UsedBytes <= int64(len(bodyA)) || sum.AllocatedBytes <= 0 || sum.AllocatedBytes > sum.UsedBytes+1<<20 {
		t.Errorf("volume sizes: used %d allocated %d (compacted: allocation tracks use)", sum.UsedBytes, sum.AllocatedBytes)
	}
	if names := dirNames(t, dir); strings.Join(names, " ") != "beta.tar golden.ext4" {
		t.Errorf("left next to OUT: %v", names)
	}
	v, err := ext4lite.Open(out, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if rep, err := v.Check(nil); err != nil || !rep.Clean() {
		t.Fatalf("check: %v %v", err, rep.Err())
	}
	for name, want := range map[string]string{"shutdown": "clean\n", "args": "--iptables=false --host=unix:///var/run/docker.sock\n", "image/alpha.tar": string(bodyA)} {
		f, err := v.Open(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, _ := io.ReadAll(f)
		if string(got) != want {
			t.Errorf("%s holds %.40q, want %.40q", name, got, want)
		}
	}
	if out, err := exec.Command("e2fsck", "-fn", out).CombinedOutput(); err != nil {
		if _, lerr := exec.LookPath("e2fsck"); lerr == nil {
			t.Errorf("e2fsck -fn: %v\n%s", err, out)
		}
	}
}

// TestBuildGoldenFailures: a failing load, a daemon image without a
// daemon, and an existing OUT each fail with a clear error, leaving no OUT
// and no temporary file (an existing OUT untouched).
func TestBuildGoldenFailures(t *testing.T) {
	need(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tar")
	if err := os.WriteFile(bad, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "golden.ext4")
	reg := testRegistry(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"failing load", []string{"--daemon-image", standIn, "--load", bad}, "docker load -i /gvx-golden/load/0/bad.tar:"},
		{"missing tar", []string{"--daemon-image", standIn, "--load", filepath.Join(dir, "none.tar")}, "no such file"},
		{"no daemon", []string{"--daemon-image", "oci:" + filepath.Join(dir, "nothing")}, "run the daemon image"},
		{"pull of a missing image", []string{"--daemon-image", standIn, "--pull", reg + "/gvx/none:v1"}, "--pull " + reg + "/gvx/none:v1: GET "},
		{"bad reference", []string{"--daemon-image", standIn, "--pull", "Bad:Ref!"}, `--pull "Bad:Ref!": not an image reference`},
		{"bad platform", []string{"--daemon-image", standIn, "--platform", "linux"}, "--platform: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, err := runCLI(append(append([]string{"--rungv", rungvBin, "--size", "64M", "--ready-timeout", "20s", "--timeout", "2m"}, c.args...), out)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q\nstderr:\n%s", err, c.want, stderr)
			}
			if names := dirNames(t, dir); strings.Join(names, " ") != "bad.tar" {
				t.Errorf("left behind: %v", names)
			}
		})
	}
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI("--rungv", rungvBin, "--daemon-image", standIn, out); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("existing OUT: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Error("existing OUT changed")
	}
}
