package poolcmd_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/runtime/runtimetest"
	"z.gfire.dev/gvx/sink"
)

// The suite builds rungv and the busybox image once, in a directory every
// user may read: as root the test runs `rungv pool` as nobody (rootless).
var (
	shared   string
	rungvBin string
	imageRef string
	setupErr error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		env, err := runtimetest.NewEnv("rungv-pool-test-", v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}})
		if env.Dir != "" {
			defer os.RemoveAll(env.Dir)
		}
		shared, rungvBin, imageRef, setupErr = env.Dir, env.Rungv, env.ImageRef, err
		return m.Run()
	}())
}

type result struct {
	Episodes []struct {
		Episode        int    `json:"episode"`
		ExitCode       int    `json:"exit_code"`
		CloneMethod    string `json:"clone_method"`
		AllocatedBytes int64  `json:"allocated_bytes"`
		ReadyMS        float64
		Error          string `json:"error"`
		Stdout         string `json:"stdout"`
	} `json:"episodes"`
	Summary struct {
		Episodes int `json:"episodes"`
		Failed   int `json:"failed"`
		Parallel int `json:"parallel"`
		Ready    struct {
			P50 float64 `json:"p50_ms"`
		} `json:"ready"`
	} `json:"summary"`
}

// TestPoolCLI runs `rungv pool --json` (as nobody when the test is root:
// the pool is rootless) with 3 episodes at once from a golden volume;
// episode 2 fails on purpose. Each episode must see the golden file and
// only its own marker, the exit status must be 1, and the scratch
// directory and TMPDIR must be empty afterwards.
func TestPoolCLI(t *testing.T) {
	if setupErr != nil {
		if errors.Is(setupErr, runtimetest.ErrNoBusybox) {
			t.Skip(setupErr)
		}
		t.Fatal(setupErr)
	}
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("setpriv (util-linux) is missing: cannot run rungv pool as nobody")
		}
		runtimetest.NeedUserNamespace(t, rungvBin, "nobody", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	} else {
		runtimetest.NeedUserNamespace(t, rungvBin, "")
	}
	work, err := os.MkdirTemp(shared, "pool-") // t.TempDir's parent is private to root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	golden := filepath.Join(work, "golden.ext4")
	v, err := ext4lite.Create(golden, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(&sink.Header{Path: "golden.txt", Mode: sink.TypeReg | 0o644, Size: 3}, strings.NewReader("gv\n")); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	scratch, tmp, cache := filepath.Join(work, "eps"), filepath.Join(work, "tmp"), filepath.Join(work, "cache")
	for _, d := range []string{scratch, tmp, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = os.Chmod(work, 0o755)

	// The temp dir is on whatever filesystem the machine has: let the pool
	// copy where it cannot clone (pkg/gvx's tests clone on a loop XFS).
	cmd := exec.Command(rungvBin, "pool", "--golden", golden, "--scratch", scratch, "--clone", "auto",
		"-n", "3", "-j", "3", "--timeout", "1m", "--ready", "marked", "--json", "--",
		imageRef, "sh", "-c", `cat /var/lib/docker/golden.txt
touch /var/lib/docker/mine-$GVX_EPISODE
echo marked
sleep 0.3
ls /var/lib/docker | tr '\n' ' '
[ "$GVX_EPISODE" != 2 ]`)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GVX_CACHE_DIR="+cache)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("rungv pool: %v (want exit status 1)\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	var r result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, stdout.String())
	}
	if len(r.Episodes) != 3 || r.Summary.Episodes != 3 || r.Summary.Failed != 1 || r.Summary.Parallel != 3 || r.Summary.Ready.P50 <= 0 {
		t.Fatalf("summary: %+v", r)
	}
	for i, e := range r.Episodes {
		want := fmt.Sprintf("gv\nmarked\ngolden.txt lost+found mine-%d ", i)
		if e.Episode != i || e.Stdout != want || e.AllocatedBytes <= 0 {
			t.Errorf("episode %d: %+v, want stdout %q", i, e, want)
		}
		if failed := i == 2; failed != (e.Error != "") || (failed && e.ExitCode != 1) {
			t.Errorf("episode %d: exit %d error %q", i, e.ExitCode, e.Error)
		}
	}
	for _, d := range []string{scratch, tmp} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("left in %s: %v", d, ents)
		}
	}
}

// TestPoolCLIKillAfter: with --kill-after, episodes whose guest keeps
// running (a daemon) are ended by the pool, which is a success.
func TestPoolCLIKillAfter(t *testing.T) {
	if setupErr != nil {
		t.Skip(setupErr)
	}
	dir := t.TempDir()
	golden := emptyGolden(t, dir)
	cmd := exec.Command(rungvBin, "pool", "--golden", golden, "--scratch", filepath.Join(dir, "eps"), "--clone", "auto",
		"-n", "2", "-j", "2", "--ready", "up", "--kill-after", "200ms", "--json", imageRef, "sh", "-c", "echo up; exec sleep 1000")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "GVX_CACHE_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Episodes {
		if e.ExitCode != -1 || e.Error != "" {
			t.Errorf("episode %+v: want killed (exit -1) without error", e)
		}
	}
}

// TestPoolCLIWarm: with --warm 2 every episode is a claim from the warm
// pool (2 ready before the clock starts, each replaced as it is claimed);
// --json reports claim latency apart from boot (ready) latency and each
// episode's idle memory; nothing is left in the scratch dir.
func TestPoolCLIWarm(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	golden := emptyGolden(t, dir)
	scratch := filepath.Join(dir, "eps")
	cmd := exec.Command(rungvBin, "pool", "--golden", golden, "--scratch", scratch, "--clone", "auto",
		"-n", "4", "-j", "2", "--warm", "2", "--warm-memory", "4g", "--ready", "up", "--kill-after", "100ms", "--json",
		"--network", "none", imageRef, "sh", "-c", "echo up; exec sleep 1000")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "GVX_CACHE_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r struct {
		Episodes []struct {
			ClaimMS    float64 `json:"claim_ms"`
			ReadyMS    float64 `json:"ready_ms"`
			Warm       bool    `json:"warm"`
			IdleMemory int64   `json:"idle_memory_bytes"`
			Error      string  `json:"error"`
		} `json:"episodes"`
		Summary struct {
			Warm     int     `json:"warm"`
			WarmupMS float64 `json:"warmup_ms"`
			Claim    struct {
				P50 float64 `json:"p50_ms"`
			} `json:"claim"`
			IdleMemory int64 `json:"idle_memory_bytes_p50"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Episodes) != 4 || r.Summary.Warm != 4 || r.Summary.WarmupMS <= 0 || r.Summary.Claim.P50 <= 0 || r.Summary.IdleMemory <= 0 {
		t.Fatalf("summary: %s", out)
	}
	for i, e := range r.Episodes {
		if !e.Warm || e.Error != "" || e.ClaimMS <= 0 || e.ReadyMS <= 0 || e.IdleMemory <= 0 {
			t.Errorf("episode %d: %+v", i, e)
		}
	}
	if ents, _ := os.ReadDir(scratch); len(ents) != 0 {
		t.Errorf("left in %s: %v", scratch, ents)
	}
}

// needSandbox skips t where no rootless sandbox can run.
func needSandbox(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Skip(setupErr)
	}
	if os.Getuid() != 0 {
		runtimetest.NeedUserNamespace(t, rungvBin, "")
	}
}

// emptyGolden makes an empty 64 MiB golden volume in dir.
func emptyGolden(t *testing.T, dir string) string {
	t.Helper()
	golden := filepath.Join(dir, "golden.ext4")
	v, err := ext4lite.Create(golden, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	return golden
}

// TestPoolCLIMountSize: an extra --mount keeps its size= (the pool once
// dropped it and the missing volume came out 32 GiB), and a quoted CSV
// field carries a path with "," and "=" through the pool to rungv run.
func TestPoolCLIMountSize(t *testing.T) {
	needSandbox(t)
	dir := t.TempDir()
	golden := emptyGolden(t, dir)
	extra := filepath.Join(dir, "extra,1=x.ext4")
	cmd := exec.Command(rungvBin, "pool", "--golden", golden, "--scratch", filepath.Join(dir, "eps"), "--clone", "auto",
		"-n", "1", "--json", "--mount", `type=volume,"src=`+extra+`",dst=/extra,size=80m`,
		imageRef, "sh", "-c", "echo kept > /extra/f; df -k /extra | tail -1")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "GVX_CACHE_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	st, err := os.Stat(extra)
	if err != nil || st.Size() != 80<<20 {
		t.Fatalf("the extra volume: %v, %v; want a file of 80 MiB (%s)", st, err, out)
	}
	v, err := ext4lite.Open(extra, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if h, err := v.Lstat("f"); err != nil || h.Size != 5 {
		t.Errorf("f in the extra volume: %+v, %v (%s)", h, err, out)
	}
}

// TestPoolCLIRefuses: bad options are usage errors (exit status 2) with a
// message; a golden volume that is not there is exit status 125.
func TestPoolCLIRefuses(t *testing.T) {
	if setupErr != nil {
		t.Skip(setupErr)
	}
	dir := t.TempDir()
	specFile := filepath.Join(dir, "ep.json")
	if err := os.WriteFile(specFile, []byte(`{"version":1,"image":"oci:/x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--golden", filepath.Join(dir, "none.ext4"), "--scratch", dir, "oci:/x"}, 125, "golden volume"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "-n", "0", "oci:/x"}, 2, "-n and -j"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--clone", "never", "oci:/x"}, 2, "--clone"},
		{[]string{"--golden", rungvBin, "--scratch", dir}, 2, "IMAGE is required"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--network", "none", "--allow-host-port", "5000", "oci:/x"}, 2, "--allow-host-port: needs network nat"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--egress", "allow=example.com", "oci:/x"}, 2, "--egress (egress[0])"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--allow-host-port", "0", "oci:/x"}, 2, "--allow-host-port (allow_host_ports[0])"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--nat-max-relays", "0", "oci:/x"}, 2, "--nat-max-relays 0"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--mount", "type=tmpfs,dst=rel", "oci:/x"}, 2, "dst= must be an absolute path"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--memory", "lots", "oci:/x"}, 2, "--memory"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--memory", "1g", "--memory-bytes", "5", "oci:/x"}, 2, "--memory-bytes"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "-p", "unix:/tmp/x.sock:80", "oci:/x"}, 2, "-p"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--spec", specFile, "--cpus", "2"}, 2, "--cpus cannot be given with --spec"},
		{[]string{"--golden", rungvBin, "--scratch", dir, "--spec", specFile, "oci:/y"}, 2, "IMAGE and COMMAND cannot be given with --spec"},
	} {
		out, err := exec.Command(rungvBin, append([]string{"pool"}, c.args...)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), "rungv pool") || !strings.Contains(string(out), c.says) {
			t.Errorf("%v: %v %s; want exit %d saying %q", c.args, err, out, c.code, c.says)
		}
	}
}

// TestPoolCLIEgress: pool episodes with --network nat have rungv run's
// default policy (a server on the host's 127.0.0.1 is refused through
// 10.0.2.2) and take --allow-host-port like rungv run.
func TestPoolCLIEgress(t *testing.T) {
	needSandbox(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host-secret") }))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	golden := emptyGolden(t, dir)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "refused"},
		{[]string{"--allow-host-port", port}, "host-secret"},
	} {
		args := append(append([]string{"pool", "--golden", golden, "--scratch", filepath.Join(dir, "eps"), "--clone", "auto",
			"-n", "2", "-j", "2", "--json", "--network", "nat"}, c.flags...), imageRef, "sh", "-c", "wget -qO- http://10.0.2.2:"+port+"/ 2>&1; true")
		cmd := exec.Command(rungvBin, args...)
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "GVX_CACHE_DIR="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v: %s", c.flags, err, out)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Episodes) != 2 {
			t.Fatalf("%v: %s", c.flags, out)
		}
		for _, e := range r.Episodes {
			if !strings.Contains(e.Stdout, c.want) || (c.want == "refused" && strings.Contains(e.Stdout, "host-secret")) {
				t.Errorf("%v: episode %d printed %q, want %q", c.flags, e.Episode, e.Stdout, c.want)
			}
		}
	}
}
