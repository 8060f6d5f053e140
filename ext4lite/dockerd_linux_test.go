package ext4lite

// Real-peer proof that ext4lite volumes hold a whole /var/lib/docker: a real
// dockerd (Debian's docker.io, overlay2 driver) runs on a loop-mounted
// ext4lite volume, and on a volume ext4lite wrote itself by copying such a
// tree (what build-golden produces), compacted and cloned without reflink.
//
// Every daemon gets its own socket, pidfile, exec-root, config file and
// cgroup parent under a private temp dir; a cleanup stops it gracefully,
// then kills what is left of it by pid (dockerd's process group, the
// containerd and shims whose command line names its private dir, the
// container processes in its cgroup parent), detaches every mount it left
// and removes its cgroups, so a failing test leaves no daemon and no mount
// behind (TestDockerdCrashLeavesNothing proves it). Volumes are unmounted
// with dkUmount, which waits until the kernel really let go of them.

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/image/imagetest"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

const (
	dkBaseRef  = "gvx/busybox:test" // loaded with docker load
	dkBuiltRef = "gvx/built:test"   // docker build FROM dkBaseRef
	dkVolSize  = 2 << 30            // volume size, as the brief asks
	dkTimeout  = 90 * time.Second   // any single docker CLI call
	dkStopWait = 30 * time.Second   // graceful dockerd shutdown
	dkUpWait   = 30 * time.Second   // dockerd answering /_ping
	dkCgroupFS = "/sys/fs/cgroup"   // cgroup v1 hierarchies (or the v2 root)
	dkLoadWant = "Loaded image: " + dkBaseRef
)

// dkDockerfile is built FROM the loaded image. The first RUN writes files
// through the kernel: a small one, a fallocated one written only at its
// start (unwritten extents over blocks that held random data just
// before), a sparse one, a fifo, a directory of 3000 entries (htree) with
// a rename. The second deletes a file and a directory of the base image,
// so the new layer has whiteouts made by the kernel's overlayfs (not by an
// unpacked tar).
const dkDockerfile = `FROM ` + dkBaseRef + `
RUN echo built > /built.txt \
 && busybox dd if=/dev/urandom of=/junk bs=1M count=4 2>/dev/null && busybox sync -f / && rm /junk && busybox sync -f / \
 && busybox fallocate -l 4194304 /falloc && echo head | busybox dd of=/falloc conv=notrunc 2>/dev/null \
 && busybox truncate -s 64M /sparse && echo end >> /sparse && busybox mkfifo /fifo \
 && mkdir /many && cd /many && for i in $(busybox seq 3000); do echo $i > f$i; done && busybox mv f1 renamed
RUN rm /etc/group && rm -r /srv/many
`

// The lower layer's bulk: enough entries for an htree directory, a file
// of several extents, an xattr docker must carry from the tar.
const (
	dkManyFiles = 2000
	dkBigSize   = 3 << 20
	dkXattr     = "user.gvx"
	dkXattrVal  = "kept"
)

func dkManyName(i int) string {
	return fmt.Sprintf("srv/many/f-%04d-%s", i, strings.Repeat("x", i%50))
}

// dkBigBody is dkBigSize bytes no block of which repeats.
func dkBigBody() []byte {
	b := make([]byte, dkBigSize)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	return b
}

// dkTools are the peers: dockerd and the docker CLI. The CLI that ships
// with dockerd (/usr/bin/docker of docker.io) is preferred over any other
// on $PATH: a newer CLI would route `docker build` elsewhere.
type dkTools struct{ dockerd, containerd, docker string }

func needDockerd(t testing.TB) dkTools {
	t.Helper()
	needRoot(t)
	var tl dkTools
	var err error
	if tl.dockerd, err = exec.LookPath("dockerd"); err != nil {
		t.Skip("dockerd not installed (apt-get install docker.io)")
	}
	if tl.containerd, err = exec.LookPath("containerd"); err != nil {
		t.Skip("containerd not installed (apt-get install docker.io)")
	}
	if st, err := os.Stat("/usr/bin/docker"); err == nil && st.Mode().IsRegular() {
		tl.docker = "/usr/bin/docker"
	} else if tl.docker, err = exec.LookPath("docker"); err != nil {
		t.Skip("docker CLI not installed (apt-get install docker.io)")
	}
	if _, err := imagetest.FindBusybox(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck not installed (apt-get install e2fsprogs)")
	}
	return tl
}

// dkImageTar writes the test image as a docker-archive: the busybox image
// of imagetest; a layer that adds /etc/motd, /srv/data/{old1,old2}, a
// multi-extent file with a hard link, a setuid file of uid 1000 with a
// user xattr and a directory of dkManyFiles entries (indexed, htree, on
// ext4); and a layer that deletes /etc/motd (whiteout) and makes /srv/data
// opaque with only /srv/data/new in it.
func dkImageTar(t testing.TB) string {
	t.Helper()
	base, err := imagetest.BusyboxImage()
	if err != nil {
		t.Skip(err)
	}
	lowerEntries := []imagetest.Entry{
		imagetest.Dir("srv", 0o755), imagetest.Dir("srv/data", 0o755),
		imagetest.File("srv/data/old1", "old one\n"), imagetest.File("srv/data/old2", "old two\n"),
		imagetest.File("etc/motd", "lower motd\n"),
		{Name: "srv/big", Type: tar.TypeReg, Mode: 0o644, Body: string(dkBigBody())},
		{Name: "srv/big-link", Type: tar.TypeLink, Mode: 0o644, Linkname: "srv/big"}, // docker chmods the target to a link's mode
		{Name: "srv/owned", Type: tar.TypeReg, Mode: 0o4755, UID: 1000, GID: 1000, Body: "#!/bin/sh\n",
			Xattrs: map[string]string{dkXattr: dkXattrVal}},
		imagetest.Dir("srv/many", 0o755),
	}
	for i := range dkManyFiles {
		lowerEntries = append(lowerEntries, imagetest.File(dkManyName(i), strconv.Itoa(i)+"\n"))
	}
	lower, err := imagetest.Tar(lowerEntries...)
	if err != nil {
		t.Fatal(err)
	}
	upper, err := imagetest.Tar(
		imagetest.Dir("etc", 0o755), imagetest.Whiteout("etc", "motd"),
		imagetest.Dir("srv", 0o755), imagetest.Dir("srv/data", 0o755), imagetest.Opaque("srv/data"),
		imagetest.File("srv/data/new", "upper\n"),
	)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := imagetest.Layer(lower)
	if err != nil {
		t.Fatal(err)
	}
	up, err := imagetest.Layer(upper)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, lo, up)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(dkBaseRef)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// dockerd is one daemon started by a test.
type dockerd struct {
	t        testing.TB
	tools    dkTools
	dataRoot string
	dir      string // private: sockets, pidfile, exec-root, configs, CLI config
	sock     string
	execRoot string
	cgroup   string  // --cgroup-parent, removed at stop
	ctrd     *dkProc // our own containerd
	daemon   *dkProc // dockerd
	stopped  bool
	crashed  bool          // killed by crash: stop only reaps
	up       time.Duration // from exec of containerd to dockerd's first answered /_ping
}

// dkProc is a daemon process of a test, leader of its own process group.
type dkProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once cmd was waited for
}

func dkStart(t testing.TB, log, name string, args ...string) *dkProc {
	t.Helper()
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &dkProc{name: filepath.Base(name), cmd: exec.Command(name, args...), log: log, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *dkProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// term sends SIGTERM and waits up to dkStopWait; it reports why the
// process did not exit cleanly, or "".
func (p *dkProc) term() string {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Sprintf("SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.done:
		if st := p.cmd.ProcessState; st != nil && !st.Success() {
			return fmt.Sprintf("%s exited with %v after SIGTERM\n%s", p.name, st, p.logTail())
		}
		return ""
	case <-time.After(dkStopWait):
		return fmt.Sprintf("%s still running %v after SIGTERM\n%s", p.name, dkStopWait, p.logTail())
	}
}

// kill kills the process group and waits for the leader.
func (p *dkProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *dkProc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return p.name + " log (tail):\n" + string(b)
}

// dkContainerdConfig is what dockerd writes for the containerd it would
// start itself (content store and metadata in the data-root, state in the
// exec-root), with the address ours. Starting it ourselves keeps the test
// hermetic: dockerd would use a system containerd instead, were one
// running.
const dkContainerdConfig = `root = %q
state = %q
disabled_plugins = ["cri"]

[grpc]
  address = %q

[plugins]
  [plugins.linux]
    runtime_root = %q
`

// startDockerd starts dockerd with --data-root on dataRoot and waits until
// it answers. Its cleanup (registered after the caller's mount, so it runs
// before the unmount) stops it and leaves no process or mount behind.
func startDockerd(t testing.TB, tl dkTools, dataRoot string) *dockerd {
	t.Helper()
	// Not t.TempDir(): containerd's sockets live under the exec-root and a
	// unix socket path must fit in 108 bytes; test names would not.
	dir, err := os.MkdirTemp("", "gvxd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove dockerd state: %v", err)
		}
	})
	d := &dockerd{
		t: t, tools: tl, dataRoot: dataRoot, dir: dir,
		sock:     filepath.Join(dir, "d.sock"),
		execRoot: filepath.Join(dir, "x"),
		cgroup:   "gvx-" + filepath.Base(dir),
	}
	cfg := filepath.Join(dir, "daemon.json") // hermetic: not /etc/docker/daemon.json
	if err := os.WriteFile(cfg, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctrdSock := filepath.Join(d.execRoot, "containerd", "containerd.sock")
	ctrdCfg := filepath.Join(dir, "containerd.toml")
	toml := fmt.Sprintf(dkContainerdConfig, filepath.Join(dataRoot, "containerd", "daemon"),
		filepath.Join(d.execRoot, "containerd", "daemon"), ctrdSock, filepath.Join(dataRoot, "runc"))
	if err := os.WriteFile(ctrdCfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "cli"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	start := time.Now()
	d.ctrd = dkStart(t, filepath.Join(dir, "containerd.log"), tl.containerd, "--config", ctrdCfg, "--log-level", "info")
	for {
		if d.ctrd.exited() {
			t.Fatalf("containerd exited at start: %v\n%s", d.ctrd.cmd.ProcessState, d.ctrd.logTail())
		}
		if c, err := net.Dial("unix", ctrdSock); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > dkUpWait {
			t.Fatalf("containerd did not listen on %s within %v\n%s", ctrdSock, dkUpWait, d.ctrd.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.daemon = dkStart(t, filepath.Join(dir, "dockerd.log"), tl.dockerd,
		"--data-root", dataRoot,
		"-H", "unix://"+d.sock,
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--exec-root", d.execRoot,
		"--containerd", ctrdSock,
		"--config-file", cfg,
		"--storage-driver", "overlay2",
		"--iptables=false", "--ip6tables=false", "--bridge=none",
		"--cgroup-parent", "/"+d.cgroup,
	)

	hc := d.httpClient()
	deadline := time.Now().Add(dkUpWait)
	for {
		if d.daemon.exited() {
			t.Fatalf("dockerd exited at start: %v\n%s", d.daemon.cmd.ProcessState, d.logTail())
		}
		if resp, err := hc.Get("http://docker/_ping"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not answer on %s within %v\n%s", d.sock, dkUpWait, d.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.up = time.Since(start)
	return d
}

func (d *dockerd) httpClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "unix", d.sock)
		}},
	}
}

func (d *dockerd) logTail() string {
	var b strings.Builder
	for _, p := range []*dkProc{d.daemon, d.ctrd} {
		if p != nil {
			b.WriteString(p.logTail() + "\n")
		}
	}
	return b.String()
}

// docker runs the docker CLI against this daemon and returns its stdout;
// on failure it fails the test with stderr and the daemon's log.
func (d *dockerd) docker(args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.tools.docker, args...)
	cmd.Env = append(os.Environ(),
		"DOCKER_HOST=unix://"+d.sock,
		"DOCKER_CONFIG="+filepath.Join(d.dir, "cli"), // no credential helpers of the host
		"DOCKER_BUILDKIT=0",                          // the classic builder: one container commit per RUN
	)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		d.t.Fatalf("docker %s: %v\nstdout:\n%s\nstderr:\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String(), d.logTail())
	}
	return stdout.String()
}

// stop shuts the daemon down with SIGTERM (it stops its containers),
// then containerd; it fails the test if either does not go within
// dkStopWait or leaves processes or mounts, and in every case kills and
// detaches whatever is left. Idempotent.
func (d *dockerd) stop() {
	if d.stopped {
		return
	}
	d.stopped = true
	graceful := !d.crashed
	for _, p := range []*dkProc{d.daemon, d.ctrd} {
		if p == nil || d.crashed {
			continue
		}
		if why := p.term(); why != "" {
			graceful = false
			d.t.Error(why)
		}
	}
	d.reap(graceful)
}

// crash kills dockerd's process group with SIGKILL and nothing else, as
// when a daemon dies: its containerd, shims and containers keep running
// until reap.
func (d *dockerd) crash() {
	d.crashed = true
	d.daemon.kill()
}

// reap kills every process the daemon left (the process groups of dockerd
// and containerd, then each leftover by pid), detaches every mount it left
// and removes its cgroups. With strict set, leftovers are test failures:
// a daemon that stopped by itself must leave nothing.
func (d *dockerd) reap(strict bool) {
	t := d.t
	for _, p := range []*dkProc{d.daemon, d.ctrd} {
		if p != nil {
			p.kill()
		}
	}
	for i := range 3 { // again, in case one was forking as we killed
		left := d.leftovers()
		if len(left) == 0 {
			break
		}
		if strict && i == 0 {
			t.Errorf("processes of dockerd left after it stopped: %v", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		d.waitGone(left)
	}
	if mnts := d.mounts(); len(mnts) > 0 {
		if strict {
			t.Errorf("mounts of dockerd left after it stopped: %v", mnts)
		}
		for _, m := range mnts { // deepest first
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("detach %s: %v", m, err)
			}
		}
	}
	d.removeCgroups()
}

// leftovers lists processes this daemon started that still run: those
// whose command line names its private dir (containerd, shims) and those
// in its cgroup parent (container processes; their root, in their own
// mount namespace, would read as "/").
func (d *dockerd) leftovers() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || dkZombie(pid) {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cl), d.dir+"/") {
			pids = append(pids, pid)
			continue
		}
		if d.inCgroup(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// inCgroup reports whether pid is in a cgroup below the daemon's cgroup
// parent in any hierarchy.
func (d *dockerd) inCgroup(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.HasPrefix(f[2], "/"+d.cgroup+"/") {
			return true
		}
	}
	return false
}

// dkZombie reports whether pid has exited but was not reaped yet (a zombie
// holds no mounts or files; its parent, or init, reaps it).
func dkZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func (d *dockerd) waitGone(pids []int) {
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for !dkZombie(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// mounts lists mount points strictly below the data-root or inside the
// private dir, deepest first.
func (d *dockerd) mounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		d.t.Errorf("mountinfo: %v", err)
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 5 {
			continue
		}
		mp := unescapeMount(fl[4])
		if strings.HasPrefix(mp, d.dataRoot+"/") || strings.HasPrefix(mp, d.dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the cgroup-parent directories the daemon created
// for its containers in every hierarchy, deepest first (a cgroup directory
// goes with rmdir once no process is in it).
func (d *dockerd) removeCgroups() {
	dirs, _ := filepath.Glob(filepath.Join(dkCgroupFS, "*", d.cgroup))
	dirs = append(dirs, filepath.Join(dkCgroupFS, d.cgroup))
	var rm func(p string)
	rm = func(p string) {
		ents, err := os.ReadDir(p)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		for _, e := range ents {
			if e.IsDir() {
				rm(filepath.Join(p, e.Name()))
			}
		}
		if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
			d.t.Errorf("remove cgroup %s: %v", p, err)
		}
	}
	for _, p := range dirs {
		rm(p)
	}
}

// run does `docker run --rm --network none ref args...` and returns its
// output and how long the CLI took.
func (d *dockerd) run(ref string, args ...string) (string, time.Duration) {
	d.t.Helper()
	start := time.Now()
	out := d.docker(append([]string{"run", "--rm", "--network", "none", ref}, args...)...)
	return out, time.Since(start)
}

// dkSections splits output at lines "--".
func dkSections(out string) []string {
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n--\n")
}

var dkHostname = regexp.MustCompile(`^[0-9a-f]{12}$`)

// checkBaseRun runs the loaded image and checks what its layers promise:
// the whiteout hides /etc/motd, the opaque dir shows only the upper layer.
func (d *dockerd) checkBaseRun() time.Duration {
	t := d.t
	t.Helper()
	last := "/" + dkManyName(dkManyFiles-1)
	out, took := d.run(dkBaseRef, "sh", "-c",
		"echo hi; echo --; ls /; echo --; cat /etc/hostname; echo --; ls /etc; echo --; ls -a /srv/data; echo --; cat /srv/data/new; "+
			"echo --; ls /srv/many | busybox wc -l; echo --; cat "+last+"; echo --; ls -ln /srv/big /srv/big-link /srv/owned; echo --; busybox md5sum /srv/big-link")
	s := dkSections(out)
	if len(s) != 10 {
		t.Fatalf("docker run output has %d sections, want 10:\n%s", len(s), out)
	}
	if s[0] != "hi" {
		t.Errorf("echo hi printed %q", s[0])
	}
	for _, want := range []string{"bin", "etc", "srv", "tmp"} {
		if !dkHasLine(s[1], want) {
			t.Errorf("ls / lacks %s:\n%s", want, s[1])
		}
	}
	if !dkHostname.MatchString(s[2]) {
		t.Errorf("/etc/hostname = %q, want the container's short id", s[2])
	}
	if dkHasLine(s[3], "motd") || !dkHasLine(s[3], "passwd") || !dkHasLine(s[3], "group") {
		t.Errorf("ls /etc: want passwd and group but no motd (whited out):\n%s", s[3])
	}
	if got := strings.Fields(s[4]); strings.Join(got, " ") != ". .. new" {
		t.Errorf("ls -a /srv/data = %q, want only the opaque upper layer's new", got)
	}
	if s[5] != "upper" {
		t.Errorf("/srv/data/new = %q, want upper", s[5])
	}
	if s[6] != strconv.Itoa(dkManyFiles) {
		t.Errorf("/srv/many holds %s entries, want %d", s[6], dkManyFiles)
	}
	if want := strconv.Itoa(dkManyFiles - 1); s[7] != want {
		t.Errorf("%s = %q, want %s", last, s[7], want)
	}
	// mode links uid gid size ... name
	wantLs := [][]string{
		{"-rw-r--r--", "2", "0", "0", strconv.Itoa(dkBigSize)},
		{"-rw-r--r--", "2", "0", "0", strconv.Itoa(dkBigSize)},
		{"-rwsr-xr-x", "1", "1000", "1000", "10"},
	}
	ls := strings.Split(s[8], "\n")
	for i, w := range wantLs {
		if i >= len(ls) || len(strings.Fields(ls[i])) < 5 || strings.Join(strings.Fields(ls[i])[:5], " ") != strings.Join(w, " ") {
			t.Errorf("ls -ln of /srv/big, big-link, owned:\n%s\nwant line %d to start %v", s[8], i, w)
			break
		}
	}
	if want := fmt.Sprintf("%x  /srv/big-link", md5.Sum(dkBigBody())); s[9] != want {
		t.Errorf("md5sum = %q, want %q", s[9], want)
	}
	return took
}

// checkBuiltRun runs the built image: the file the first RUN wrote is
// there, the one the second RUN deleted is not, the base's layers still
// apply.
func (d *dockerd) checkBuiltRun() {
	t := d.t
	t.Helper()
	out, _ := d.run(dkBuiltRef, "sh", "-c", "cat /built.txt; echo --; ls /etc; echo --; ls -a /srv/data; "+
		"echo --; ls /many | busybox wc -l; echo --; cat /many/renamed /many/f3000; echo --; ls -ln /falloc /sparse; "+
		"echo --; busybox md5sum /falloc /sparse; echo --; test -p /fifo && echo fifo; test -e /srv/many || echo gone; test -e /many/f1 || echo moved")
	s := dkSections(out)
	if len(s) != 8 {
		t.Fatalf("docker run output has %d sections, want 8:\n%s", len(s), out)
	}
	if s[0] != "built" {
		t.Errorf("/built.txt = %q, want built", s[0])
	}
	if dkHasLine(s[1], "group") || dkHasLine(s[1], "motd") || !dkHasLine(s[1], "passwd") {
		t.Errorf("ls /etc: want passwd but neither group (deleted by RUN) nor motd:\n%s", s[1])
	}
	if got := strings.Fields(s[2]); strings.Join(got, " ") != ". .. new" {
		t.Errorf("ls -a /srv/data = %q, want only new", got)
	}
	if s[3] != "3000" {
		t.Errorf("/many holds %s entries, want 3000", s[3])
	}
	if s[4] != "1\n3000" {
		t.Errorf("/many/renamed, /many/f3000 = %q, want 1 and 3000", s[4])
	}
	ls := strings.Split(s[5], "\n")
	if len(ls) != 2 || len(strings.Fields(ls[0])) < 5 || len(strings.Fields(ls[1])) < 5 ||
		strings.Fields(ls[0])[4] != "4194304" || strings.Fields(ls[1])[4] != strconv.Itoa(64<<20+4) {
		t.Errorf("ls -ln /falloc /sparse:\n%s\nwant sizes 4194304 and %d", s[5], 64<<20+4)
	}
	want := fmt.Sprintf("%x  /falloc\n%x  /sparse", dkZeroMD5("head\n", 4<<20-5, ""), dkZeroMD5("", 64<<20, "end\n"))
	if s[6] != want {
		t.Errorf("md5sum:\n%s\nwant (unwritten extents and holes read as zeros):\n%s", s[6], want)
	}
	if s[7] != "fifo\ngone\nmoved" {
		t.Errorf("fifo, whited-out /srv/many, renamed /many/f1: %q, want fifo gone moved", s[7])
	}
}

// dkZeroMD5 is the MD5 of head, n zero bytes and tail.
func dkZeroMD5(head string, n int64, tail string) [md5.Size]byte {
	h := md5.New()
	io.WriteString(h, head)
	io.CopyN(h, dkZeros{}, n)
	io.WriteString(h, tail)
	var sum [md5.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

type dkZeros struct{}

func (dkZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func dkHasLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// build runs `docker build` of dkDockerfile; with noCache every RUN makes
// a new layer even where the image exists.
func (d *dockerd) build(noCache bool) {
	d.t.Helper()
	ctxDir := d.t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dkDockerfile), 0o644); err != nil {
		d.t.Fatal(err)
	}
	args := []string{"build", "--network", "none", "-q", "-t", dkBuiltRef}
	if noCache {
		args = append(args, "--no-cache")
	}
	d.docker(append(args, ctxDir)...)
}

// dkDockerVolume makes a fresh ext4lite volume and has a real dockerd load
// the test image into it, run it, build an image FROM it and run that;
// the daemon is stopped and the volume unmounted when it returns.
func dkDockerVolume(t testing.TB, tl dkTools) string {
	t.Helper()
	imgTar := dkImageTar(t)
	v, vol := newVolume(t, dkVolSize)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := mount(t, vol, "rw")
	d := startDockerd(t, tl, mnt)
	t.Logf("dockerd up on a fresh ext4lite volume in %v", d.up)
	if out := d.docker("load", "-i", imgTar); !strings.Contains(out, dkLoadWant) {
		t.Fatalf("docker load said %q, want %q", out, dkLoadWant)
	}
	took := d.checkBaseRun()
	t.Logf("docker run of the loaded image: %v", took)
	d.build(false)
	d.checkBuiltRun()
	d.stop()
	dkUmount(t, mnt, vol)
	return vol
}

// dkUmount unmounts the loop-mounted volume img at mnt and waits until the
// kernel has let go of the filesystem (its loop device detached), so what
// follows reads a flushed, checkpointed file. umount returning is not
// enough: a mount namespace created meanwhile by any process on the host
// (runc, a sandbox) holds a copy of the mount, and the filesystem is shut
// down only when the last copy goes; until then e2fsck would read stale
// metadata (journal not checkpointed).
func dkUmount(t testing.TB, mnt, img string) {
	t.Helper()
	dev, devno := dkMountDev(t, mnt)
	umount(t, mnt)
	if !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("%s was mounted from %q, not a loop device", mnt, dev)
	}
	bf := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(bf)
		if err != nil || strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") != img {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still backs %s 60s after umount: the filesystem is mounted in another mount namespace (processes %v), so it is not flushed", img, dev, dkMountHolders(devno))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dkMountDev returns the source and major:minor of the mount at mnt.
func dkMountDev(t testing.TB, mnt string) (src, devno string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		f := strings.Fields(l)
		if len(f) < 10 || unescapeMount(f[4]) != mnt {
			continue
		}
		for i := 6; i+2 < len(f); i++ {
			if f[i] == "-" {
				src, devno = unescapeMount(f[i+2]), f[2]
			}
		}
	}
	if src == "" {
		t.Fatalf("%s is not mounted", mnt)
	}
	return src, devno
}

// dkMountHolders lists processes whose mount namespace still has a mount
// of device devno, as "pid(comm)".
func dkMountHolders(devno string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "mountinfo"))
		if err != nil || !strings.Contains(string(b), " "+devno+" ") {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, e.Name()+"("+strings.TrimSpace(string(comm))+")")
	}
	return out
}

// TestDockerdOnExt4liteVolume: a real dockerd with the overlay2 driver
// works on a kernel-mounted volume ext4lite created (load, run, build with
// a whiteout, run); afterwards e2fsck and ext4lite's Check pass, and
// ext4lite reads the whole tree the kernel and overlayfs wrote exactly as
// the kernel shows it, overlay2's whiteouts and opaque xattrs included.
func TestDockerdOnExt4liteVolume(t *testing.T) {
	tl := needDockerd(t)
	vol := dkDockerVolume(t, tl)
	e2fsckClean(t, vol)
	st := dkVerify(t, vol)
	t.Logf("overlay2/: %d entries, %d whiteouts (char 0:0), %d opaque dirs, %d with %s", st.entries, st.whiteouts, st.opaques, st.xattrs, dkXattr)
	// One whiteout dockerd unpacked from the loaded layer (/etc/motd), one
	// the kernel's overlayfs made for the build's rm (/etc/group).
	if st.whiteouts < 2 || st.opaques == 0 {
		t.Errorf("overlay2/ should hold at least two whiteouts and one opaque dir; saw %d and %d", st.whiteouts, st.opaques)
	}
	if st.xattrs == 0 {
		t.Errorf("overlay2/ should hold /srv/owned with %s=%s from the layer's tar", dkXattr, dkXattrVal)
	}
}

// dkVerify checks an unmounted volume dockerd used: ext4lite's Check is
// clean, and ext4lite reads the whole tree exactly as the kernel shows it
// on a read-only mount (every xattr incl. trusted.overlay.*, whiteouts,
// hard links, contents, times but atime/ctime/crtime). It returns what it
// counted under overlay2/.
func dkVerify(t testing.TB, vol string) dkStats {
	t.Helper()
	v, err := Open(vol, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	rep, err := v.Check(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("ext4lite Check after dockerd: %v", err)
	}
	mnt := mount(t, vol, "ro")
	opts := sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true}
	if err := sinktest.Compare(v, hostSrc(t, mnt), opts); err != nil {
		t.Fatalf("ext4lite reads dockerd's tree differently from the kernel: %v", err)
	}
	return dkOverlayStats(t, v)
}

type dkStats struct{ entries, whiteouts, opaques, xattrs int }

// dkOverlayStats walks overlay2/ of a volume with ext4lite, counting
// whiteouts (char 0:0) and directories with trusted.overlay.opaque=y.
func dkOverlayStats(t testing.TB, src sink.Source) dkStats {
	t.Helper()
	var st dkStats
	var walk func(p string)
	walk = func(p string) {
		h, err := src.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st.entries++
		if string(h.Xattrs[dkXattr]) == dkXattrVal {
			st.xattrs++
		}
		switch h.Type() {
		case sink.TypeChar:
			if h.Devmajor == 0 && h.Devminor == 0 {
				st.whiteouts++
			}
		case sink.TypeDir:
			if string(h.Xattrs["trusted.overlay.opaque"]) == "y" {
				st.opaques++
			}
			names, err := src.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				walk(p + "/" + n)
			}
		}
	}
	walk("overlay2")
	return st
}

// TestDockerdAfterExt4liteWrites: the /var/lib/docker tree a real dockerd
// made is copied by ext4lite into a new volume (a golden volume written
// purely by ext4lite); that volume passes e2fsck, and a real dockerd
// started on it lists both images and runs them. The same holds after
// ext4lite compacts it, and for a reflink-free sparse copy of it, before
// and after compaction.
func TestDockerdAfterExt4liteWrites(t *testing.T) {
	tl := needDockerd(t)
	if _, err := exec.LookPath("cp"); err != nil {
		t.Skip("cp not installed")
	}
	src := dkDockerVolume(t, tl)

	dir := t.TempDir()
	golden := dkGolden(t, src, filepath.Join(dir, "golden.ext4"))

	// A reflink-free sparse clone of the golden volume as written...
	plain := dkSparseCopy(t, golden, filepath.Join(dir, "plain-clone.ext4"))
	// ...then the golden volume compacted, and a sparse clone of that.
	v, err := Open(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := v.Compact()
	if err != nil {
		v.Close()
		t.Fatalf("compact: %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("compact: used %d MiB, host allocation %d → %d MiB", cs.UsedBytes>>20, cs.AllocatedBefore>>20, cs.AllocatedAfter>>20)
	e2fsckClean(t, golden)
	dkSameTree(t, src, golden)
	compactedClone := dkSparseCopy(t, golden, filepath.Join(dir, "compacted-clone.ext4"))

	// And the kernel-made volume after ext4lite wrote into it in place.
	dkStamp(t, src)

	for _, c := range []struct {
		name, vol string
		build     bool
	}{
		{"compacted", golden, true},
		{"clone", plain, false},
		{"compacted-clone", compactedClone, false},
		{"in-place", src, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mnt := mount(t, c.vol, "rw")
			d := startDockerd(t, tl, mnt)
			t.Logf("dockerd up on the ext4lite-written volume in %v", d.up)
			imgs := d.docker("images", "--format", "{{.Repository}}:{{.Tag}}")
			for _, want := range []string{dkBaseRef, dkBuiltRef} {
				if !dkHasLine(strings.TrimSpace(imgs), want) {
					t.Errorf("docker images lacks %s:\n%s", want, imgs)
				}
			}
			took := d.checkBaseRun()
			t.Logf("docker run: %v", took)
			d.checkBuiltRun()
			if c.build {
				// The kernel writes new layers into directories and
				// files ext4lite laid out.
				d.build(true)
				d.checkBuiltRun()
			}
			d.stop()
			dkUmount(t, mnt, c.vol)
			e2fsckClean(t, c.vol)
			dkVerify(t, c.vol)
		})
	}
}

// dkGolden copies the whole tree of the volume src into a new ext4lite
// volume at dst with sink.Copy (as build-golden does), and checks e2fsck
// passes and ext4lite reads the copy as the original.
func dkGolden(t testing.TB, src, dst string) string {
	t.Helper()
	old, err := Open(src, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	uuid := [16]byte{0x67, 0x76, 0x78, 2}
	nv, err := Create(dst, dkVolSize, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := sink.Copy(nv, old); err != nil {
		nv.Close()
		t.Fatalf("copy dockerd's tree with ext4lite: %v", err)
	}
	if err := nv.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ext4lite copied dockerd's tree in %v", time.Since(start))
	e2fsckClean(t, dst)
	dkSameTree(t, src, dst)
	return dst
}

// dkStamp has ext4lite write into a volume dockerd made (a file at the
// root, an xattr on overlay2/) and checks e2fsck still passes.
func dkStamp(t testing.TB, vol string) {
	t.Helper()
	v, err := Open(vol, nil)
	if err != nil {
		t.Fatal(err)
	}
	const stamp = "golden by ext4lite\n"
	if err := v.WriteFile(&sink.Header{Path: "gvx-stamp", Mode: sink.TypeReg | 0o644, Size: int64(len(stamp))}, strings.NewReader(stamp)); err != nil {
		v.Close()
		t.Fatal(err)
	}
	if err := v.Setxattr("overlay2", "user.gvx", []byte("stamped")); err != nil {
		v.Close()
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, vol)
}

// dkSameTree compares two volumes' whole trees as ext4lite reads them
// (ctime and crtime are set by whoever writes; atime by readers; directory
// sizes depend on how the writer packs entries: the kernel's htree splits
// leave blocks half full, ext4lite fills them).
func dkSameTree(t testing.TB, a, b string) {
	t.Helper()
	va, err := Open(a, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer va.Close()
	vb, err := Open(b, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer vb.Close()
	opts := sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true}
	if err := sinktest.Compare(va, vb, opts); err != nil {
		t.Fatalf("%s and %s differ: %v", filepath.Base(a), filepath.Base(b), err)
	}
}

// dkSparseCopy clones src to dst with cp --sparse=always --reflink=never
// (the fallback where the host filesystem cannot reflink) and checks the
// clone stayed sparse: it takes no more host space than src plus slack.
func dkSparseCopy(t *testing.T, src, dst string) string {
	t.Helper()
	if out, err := exec.Command("cp", "--sparse=always", "--reflink=never", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp --sparse=always: %v\n%s", err, out)
	}
	as, ad := dkAllocated(t, src), dkAllocated(t, dst)
	t.Logf("sparse copy %s: %d MiB allocated (source %d MiB)", filepath.Base(dst), ad>>20, as>>20)
	if ad > as+(16<<20) {
		t.Errorf("sparse copy %s takes %d bytes, source %d: holes were not kept", dst, ad, as)
	}
	return dst
}

func dkAllocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestDockerdCrashLeavesNothing proves the harness itself: when dockerd
// dies with a container running (what a failing test can leave behind),
// reap kills its containerd, shim and container processes by pid, detaches
// its mounts and removes its cgroups, so the volume unmounts and stays
// clean for e2fsck.
func TestDockerdCrashLeavesNothing(t *testing.T) {
	tl := needDockerd(t)
	imgTar := dkImageTar(t)
	v, vol := newVolume(t, dkVolSize)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := mount(t, vol, "rw")
	d := startDockerd(t, tl, mnt)
	d.docker("load", "-i", imgTar)
	d.docker("run", "-d", "--network", "none", dkBaseRef, "sleep", "600")
	inCg := 0
	for _, pid := range d.leftovers() {
		if d.inCgroup(pid) {
			inCg++
		}
	}
	if inCg == 0 {
		t.Fatal("no container process found in the daemon's cgroup: the scenario is not set up")
	}
	if len(d.mounts()) == 0 {
		t.Fatal("a running container should have mounts under the data-root")
	}
	d.crash()
	if len(d.leftovers()) == 0 {
		t.Fatal("a crashed dockerd should leave its container running: the scenario is not set up")
	}
	d.reap(false)
	if left := d.leftovers(); len(left) > 0 {
		t.Errorf("processes left after reap: %v", left)
	}
	if m := d.mounts(); len(m) > 0 {
		t.Errorf("mounts left after reap: %v", m)
	}
	if cg, _ := filepath.Glob(filepath.Join(dkCgroupFS, "*", d.cgroup)); len(cg) > 0 {
		t.Errorf("cgroups left after reap: %v", cg)
	}
	dkUmount(t, mnt, vol)
	e2fsckClean(t, vol)
}

// BenchmarkDockerd measures a real dockerd on a golden volume ext4lite
// wrote (a copy of dockerd's own tree holding the test images), and on the
// same tree copied into a loop-mounted mkfs.ext4 volume for comparison:
// "start" is exec of dockerd to its first answered /_ping (ms/up; the stop
// after each is not timed), "run" is one
// `docker run --rm --network none IMG true`.
//
//	go test -run '^$' -bench Dockerd -benchtime 10x ./ext4lite
func BenchmarkDockerd(b *testing.B) {
	tl := needDockerd(b)
	src := dkDockerVolume(b, tl)
	golden := dkGolden(b, src, filepath.Join(b.TempDir(), "golden.ext4"))
	for _, vol := range []struct {
		name  string
		mount func() string
	}{
		{"ext4lite", func() string { return mount(b, golden, "rw") }},
		{"mkfs.ext4", func() string { return dkMkfsCopy(b, golden) }},
	} {
		mnt := vol.mount()
		b.Run(vol.name+"/start", func(b *testing.B) {
			var up time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := startDockerd(b, tl, mnt)
				up += d.up
				b.StopTimer()
				d.stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(up.Microseconds())/1e3/float64(b.N), "ms/up")
		})
		b.Run(vol.name+"/run", func(b *testing.B) {
			d := startDockerd(b, tl, mnt)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d.run(dkBaseRef, "true")
			}
			b.StopTimer()
			d.stop()
		})
	}
}

// dkMkfsCopy makes a mkfs.ext4 volume of the same size, mounts it and
// copies the tree of the volume src into it through the kernel.
func dkMkfsCopy(t testing.TB, src string) string {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed (apt-get install e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "mkfs.ext4")
	if out, err := exec.Command("mkfs.ext4", "-F", "-q", img, strconv.Itoa(dkVolSize>>20)+"M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := mount(t, img, "rw")
	v, err := Open(src, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	h := hostSrc(t, mnt)
	if err := sink.Copy(h, v); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	return mnt
}
