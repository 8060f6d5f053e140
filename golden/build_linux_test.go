package golden

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/image"
	"z.gfire.dev/gvx/runtime/runtimetest"
)

var (
	setupDir string
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

var setupOnce sync.Once

// TestMain removes what setup built. Setup runs on the first need, not
// here: fuzzing workers run this binary too and need no rungv.
func TestMain(m *testing.M) {
	code := m.Run()
	if setupDir != "" {
		os.RemoveAll(setupDir)
	}
	os.Exit(code)
}

// setup builds rungv and the stand-in daemon image (whose entrypoint is
// the stand-in dockerd-entrypoint.sh, by its full path, as docker:dind's
// is by name) in a directory every user may read.
func setup() {
	env, err := runtimetest.NewEnv("gvx-golden-test-", v1.Config{
		Entrypoint: []string{"/usr/local/bin/dockerd-entrypoint.sh"},
		Env:        []string{"PATH=/usr/local/bin:/bin"},
	},
		runtimetest.File{Path: "usr/local/bin/dockerd-entrypoint.sh", Mode: 0o755, Body: standInDaemon},
		runtimetest.File{Path: "usr/local/bin/docker", Mode: 0o755, Body: standInDocker})
	setupDir, rungvBin, standIn, setupErr = env.Dir, env.Rungv, env.ImageRef, err
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
		runtimetest.NeedUserNamespace(t, rungvBin, "")
	}
	t.Setenv("GVX_CACHE_DIR", t.TempDir())
	t.Setenv("TMPDIR", t.TempDir())
}

// needNamespaces skips t, with rungv's reason and the fix, where rungv
// cannot use its namespaces here (a chroot, user.max_user_namespaces=0):
// a build that loads a tar binds it into the daemon's sandbox, and a bind
// of a host file needs the namespaced mode's gofer, as root too.
func needNamespaces(t *testing.T) {
	t.Helper()
	runtimetest.NeedNamespaces(t, rungvBin, "")
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

// TestBuildPipeline: Build as a library, with the stand-in daemon image:
// two --load tars from two directories and one pull from the registry on
// loopback, no daemon flags given. The daemon is started with the image's
// own entrypoint, with the Sentry's flags (as rungv run adds them) and the
// guest socket; the summary, the progress, the volume (ext4lite's check,
// e2fsck -fn) and the directory next to Out are as promised.
func TestBuildPipeline(t *testing.T) {
	need(t)
	needNamespaces(t)
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
	var logb bytes.Buffer
	sum, err := Build(context.Background(), Options{Out: out, Rungv: rungvBin, DaemonImage: standIn,
		Loads: []string{a, b}, Pulls: []string{ref}, Size: 256 << 20, Log: &logb})
	stderr := logb.String()
	if err != nil {
		t.Fatalf("Build: %v\nlog:\n%s", err, stderr)
	}
	for _, want := range []string{"pull " + ref + ": 2 layers, ", "(" + standIn + ": /usr/local/bin/dockerd-entrypoint.sh)", "daemon ready in", "load /gvx-golden/load/0/alpha.tar", "Loaded image: beta:latest", "Loaded image: " + ref, "daemon stopped (status 0)", "compacting"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	want := []Image{{Ref: "alpha:latest", ID: "sha256:" + sha(bodyA), Size: "1kB"}, {Ref: "beta:latest", ID: "sha256:" + sha(bodyB), Size: "1kB"},
		{Ref: ref, ID: id.String(), Digest: dg.String(), Size: "2kB"}}
	if fmt.Sprint(sum.Images) != fmt.Sprint(want) || sum.Volume != out || sum.SizeBytes != 256<<20 || sum.DaemonImage != standIn || !strings.HasPrefix(sum.DaemonDigest, "sha256:") || sum.Seconds <= 0 {
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
	for name, want := range map[string]string{"shutdown": "clean\n", "args": "--host=unix:///var/run/docker.sock --iptables=false --ip6tables=false\n", "image/alpha.tar": string(bodyA)} {
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

// TestBuildFailures: a failing load, a daemon image without a daemon, a
// missing pull and bad options each fail with a clear error, leaving no
// Out and no temporary file; bad options are ErrBadOption, and an existing
// Out is ErrExists and stays untouched.
func TestBuildFailures(t *testing.T) {
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
		o    Options
		want string
		is   error
	}{
		{"failing load", Options{DaemonImage: standIn, Loads: []string{bad}}, "docker load -i /gvx-golden/load/0/bad.tar:", nil},
		{"missing tar", Options{DaemonImage: standIn, Loads: []string{filepath.Join(dir, "none.tar")}}, "no such file", nil},
		{"no daemon image", Options{DaemonImage: "oci:" + filepath.Join(dir, "nothing")}, "daemon image oci:" + filepath.Join(dir, "nothing") + ": image: not found", image.ErrNotFound},
		{"unknown local name", Options{DaemonImage: "docker:dind", DaemonPull: image.PullNever}, "gvx-vol image add --tag docker:dind SOURCE", image.ErrNotCached},
		{"pull of a missing image", Options{DaemonImage: standIn, Pulls: []string{reg + "/gvx/none:v1"}}, "pull " + reg + "/gvx/none:v1: image: not found", image.ErrNotFound},
		{"bad reference", Options{DaemonImage: standIn, Pulls: []string{"Bad:Ref!"}}, `pull "Bad:Ref!": not an image reference`, ErrBadOption},
		{"bad platform", Options{DaemonImage: standIn, Platform: "linux"}, "platform \"linux\"", ErrBadOption},
		{"bad pull policy", Options{DaemonImage: standIn, DaemonPull: "sometimes"}, "want missing, always or never", ErrBadOption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Loads != nil && c.name == "failing load" {
				needNamespaces(t) // the tar is bound in
			}
			c.o.Out, c.o.Rungv, c.o.Size, c.o.ReadyTimeout = out, rungvBin, 64<<20, 20*time.Second
			_, err := Build(context.Background(), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) || c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("err %v, want %q (%v)", err, c.want, c.is)
			}
			if names := dirNames(t, dir); strings.Join(names, " ") != "bad.tar" {
				t.Errorf("left behind: %v", names)
			}
		})
	}
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Options{Out: out, Rungv: rungvBin, DaemonImage: standIn}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), out) {
		t.Errorf("existing Out: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Error("existing Out changed")
	}
}
