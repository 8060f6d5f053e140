package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/runtime/volume"
	"z.gfire.dev/gvx/sink"
)

// forwarded are the signals rungv passes on to the guest.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

// Run runs one episode to completion and returns the guest's exit code
// (128+N when the guest was killed by signal N). It must be called from the
// rungv binary (a program that calls Main first): the sandbox is run by
// re-executing /proc/self/exe. Cancelling ctx kills the episode.
//
// Process tree: this process (the host side, locked down with
// Options.Lockdown) → a supervisor in a new user and network namespace
// (uid 0 there is the caller's uid; lo is brought up) → runsc run (attached:
// its sandbox and gofer die with it). The supervisor watches a pipe from
// this process: if this process dies, even by SIGKILL, the supervisor kills
// the sandbox and removes the episode's state directory.
func Run(ctx context.Context, o Options) (int, error) {
	if o.Network == "" {
		o.Network = NetworkNone
	}
	if o.Network != NetworkNone && o.Network != NetworkNAT {
		return 0, fmt.Errorf("%w: --network %s (none or nat)", ErrUnsupported, o.Network)
	}
	state, err := os.MkdirTemp("", "rungv-")
	if err != nil {
		return 0, err
	}
	defer removeState(state)() // works after the lockdown too
	locks, err := lockVolumes(o.Mounts)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, f := range locks {
			f.Close()
		}
	}()
	ep, err := prepare(ctx, &o, state)
	if err != nil {
		return 0, err
	}
	return ep.run(ctx, &o)
}

// lockVolumes takes each volume file's advisory lock for the episode's
// life (ext4lite.LockFile): exclusive for a read-write mount, shared for a
// read-only one. A volume another episode or a gvx-vol command is writing
// is refused before anything starts: two writers would corrupt it. The
// files stay open (and locked) until the caller closes them; the gofer
// opens the volume on its own.
func lockVolumes(ms []Mount) ([]*os.File, error) {
	var files []*os.File
	for _, m := range ms {
		if m.Type != MountVolume {
			continue
		}
		flag := os.O_RDWR
		if m.ReadOnly {
			flag = os.O_RDONLY
		}
		f, err := os.OpenFile(m.Source, flag, 0)
		if err == nil {
			if err = ext4lite.LockFile(f, !m.ReadOnly); err != nil {
				f.Close()
			}
		}
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			if errors.Is(err, ext4lite.ErrInUse) {
				return nil, fmt.Errorf("--mount %s: %s is in use by another episode or a gvx-vol command", m.Target, m.Source)
			}
			return nil, fmt.Errorf("--mount %s: %w", m.Target, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// episode is a prepared bundle.
type episode struct {
	id        string
	state     string
	runscArgs []string
	tcp       []tcpPort // published TCP ports
}

// prepare resolves the image and writes the bundle into state.
func prepare(ctx context.Context, o *Options, state string) (*episode, error) {
	img, err := resolveImage(ctx, o.Image, o.CacheDir, state)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(img.RootfsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var src sink.Source
	if im, err := erofs.Open(f, st.Size()); err == nil {
		src = im
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	bundle := filepath.Join(state, "bundle")
	rootDir := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		return nil, err
	}
	spec, err := buildSpec(o, img, src, rootDir, id)
	if err != nil {
		return nil, err
	}
	for i, m := range o.Mounts {
		switch m.Type {
		case MountBind:
			if _, err := os.Stat(m.Source); err != nil {
				return nil, fmt.Errorf("--mount %s: %w", m.Target, err)
			}
		case MountVolume:
			st, err := os.Stat(m.Source)
			if err != nil {
				return nil, fmt.Errorf("--mount %s: %w", m.Target, err)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("--mount %s: %s is not an ext4 volume file", m.Target, m.Source)
			}
			// The spec mount binds the volume file itself: the gofer mounts it
			// at the destination in its root, where the extension opens it
			// before locking down, and serves the filesystem inside it.
			opt := "rw"
			if m.ReadOnly {
				opt = "ro"
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: []string{opt, "rbind"}})
			for k, v := range volume.Annotations(i, volume.Spec{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}) {
				spec.Annotations[k] = v
			}
		}
	}
	var relays []string
	var tcp []tcpPort
	for i, p := range o.Ports {
		if p.HostAddr != "" {
			// A TCP port: the guest relay's socket lives in the state
			// directory; the supervisor splices host connections to it.
			p.HostSocket = filepath.Join(state, "ports", "p"+strconv.Itoa(i)+".sock")
			if err := os.MkdirAll(filepath.Dir(p.HostSocket), 0o700); err != nil {
				return nil, err
			}
			tcp = append(tcp, tcpPort{addr: p.HostAddr, sock: p.HostSocket})
		}
		host, err := filepath.Abs(p.HostSocket)
		if err != nil {
			return nil, err
		}
		dir := filepath.Dir(host)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("-p %s: the socket's directory: %w", p.HostSocket, err)
		}
		if st, err := os.Lstat(host); err == nil && st.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(host) // a stale socket of an earlier episode
		}
		if i == 0 {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: guestRungv, Type: "bind", Source: self, Options: []string{"ro", "rbind"}})
		}
		gdir := guestRelayDir + "/p" + strconv.Itoa(i)
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: gdir, Type: "bind", Source: dir, Options: []string{"rw", "rbind"}})
		relays = append(relays, gdir+"/"+filepath.Base(host)+"="+strconv.Itoa(p.GuestPort))
	}
	if len(relays) > 0 {
		spec.Process.Args = append(append(append([]string{guestRungv, relayCmd}, relays...), "--"), spec.Process.Args...)
	}
	if o.MemoryBytes > 0 {
		spec.Annotations[annTotalMemory] = strconv.FormatInt(o.MemoryBytes, 10)
	}
	if o.CPUs > 0 {
		n := int(o.CPUs)
		if float64(n) < o.CPUs {
			n++
		}
		spec.Annotations[annCPUNum] = strconv.Itoa(n)
	}
	if o.Network == NetworkNAT {
		if err := natSpec(spec, bundle); err != nil {
			return nil, err
		}
	}
	if hasVolume(o.Mounts) {
		shareBindMounts(spec, o.Mounts)
	}
	js, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), js, 0o644); err != nil {
		return nil, err
	}
	args := []string{
		"--root=" + filepath.Join(state, "runsc"),
		"--ignore-cgroups",
	}
	args = append(args, networkRunscFlags(o.Network)...)
	if len(o.Ports) > 0 {
		args = append(args, "--host-uds=create")
	}
	if o.Platform != "" {
		args = append(args, "--platform="+o.Platform)
	}
	if o.NetRaw {
		args = append(args, "--net-raw")
	}
	if o.AllowPacketSocketWrite {
		args = append(args, "--allow-packet-socket-write")
	}
	if o.AllowSUID {
		args = append(args, "--allow-suid")
	}
	if hasVolume(o.Mounts) {
		args = append(args, volumeRunscFlags...)
	}
	if o.DebugLogDir != "" {
		args = append(args, "--debug", "--debug-log="+filepath.Clean(o.DebugLogDir)+"/")
	}
	args = append(args, "run", "--bundle="+bundle, "gvx-"+id)
	return &episode{id: id, state: state, runscArgs: args, tcp: tcp}, nil
}

// volumeRunscFlags are the runsc flags of an episode with ext4lite volumes.
//
//   - --file-access-mounts=exclusive: the sandbox is the volume's only
//     user, so the Sentry caches its pages and lets programs memory-map its
//     files: executables, containerd's and dockerd's bolt databases,
//     sqlite, git packs. On a shared mount the Sentry allows mmap only with
//     a host FD, which an ext4lite file cannot give (ENODEV).
//   - --directfs=false: the Sentry must send every operation on a volume
//     to the gofer, where ext4lite answers it. A per-mount hint could say
//     so, but any hint also sets the sharing mode (shared: no mmap;
//     container: a memory overlay that never reaches the volume).
//   - --rootless: without directfs, runsc starts the sandbox in a nested
//     user namespace as nobody, mapped to nobody outside; only uid 0 (the
//     caller) exists in the episode's user namespace, so that fails with
//     EPERM. --rootless maps the sandbox's nobody to uid 0 instead. It
//     changes nothing else here: rungv's supervisor already holds every
//     capability in its own user namespace.
//
// Bind mounts then also go through the gofer: an episode without volumes
// keeps runsc's defaults (directfs).
var volumeRunscFlags = []string{"--file-access-mounts=exclusive", "--directfs=false", "--rootless"}

// shareBindMounts gives every host bind mount of spec a share=shared hint:
// with --file-access-mounts=exclusive (volumeRunscFlags) the Sentry would
// otherwise cache them as if nothing outside changed them, and a file the
// host adds to a bind-mounted directory would stay invisible in the guest.
// Volume mounts (binds of the volume files in mounts) get none: they must
// be exclusive.
func shareBindMounts(spec *specs.Spec, mounts []Mount) {
	vols := map[string]bool{}
	for _, m := range mounts {
		if m.Type == MountVolume {
			vols[m.Source] = true
		}
	}
	seen := map[string]bool{}
	for _, m := range spec.Mounts {
		if m.Type != "bind" || vols[m.Source] || seen[m.Source] {
			continue // runsc refuses two hints for one source
		}
		seen[m.Source] = true
		name := "dev.gvisor.spec.mount.gvxbind" + strconv.Itoa(len(seen)) + "."
		spec.Annotations[name+"source"] = m.Source
		spec.Annotations[name+"type"] = "bind"
		spec.Annotations[name+"share"] = "shared"
	}
}

func hasVolume(ms []Mount) bool {
	for _, m := range ms {
		if m.Type == MountVolume {
			return true
		}
	}
	return false
}

// run starts the supervisor and waits for it.
func (ep *episode) run(ctx context.Context, o *Options) (int, error) {
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer syncW.Close()
	cmd := exec.Command("/proc/self/exe", append([]string{superviseCmd, ep.state}, ep.runscArgs...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// gVisor writes a regular file at its own offsets, so files get a pipe
	// and a copy here, as with any other writer.
	cmd.Stdout, cmd.Stderr = unlessRegular(cmd.Stdout), unlessRegular(cmd.Stderr)
	// A terminal is read by this process (in the foreground group), not
	// by the sandbox in its own process group.
	if f, ok := cmd.Stdin.(*os.File); ok && isTerminal(f) {
		cmd.Stdin = io.NopCloser(f)
	}
	cmd.ExtraFiles = []*os.File{syncR}
	var nat *natHost
	if o.Network == NetworkNAT {
		if nat, err = newNATHost(); err != nil {
			syncR.Close()
			return 0, err
		}
		defer nat.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, nat.Child) // the supervisor's natFD
	}
	if len(ep.tcp) > 0 {
		files, err := listenTCP(ep.tcp)
		if err != nil {
			syncR.Close()
			return 0, err
		}
		var spec []publishedFD
		for i, f := range files {
			defer f.Close() // the supervisor holds its own copy
			spec = append(spec, publishedFD{FD: 3 + len(cmd.ExtraFiles) + i, Socket: ep.tcp[i].sock})
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, files...)
		js, _ := json.Marshal(spec)
		cmd.Env = append(os.Environ(), publishEnv+"="+string(js))
	}
	cg, err := newEpisodeCgroup(ep.id, o.MemoryBytes, o.CPUs)
	if err != nil {
		syncR.Close()
		return 0, fmt.Errorf("-m/--cpus: host cgroup: %w", err)
	}
	if cg != nil {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, cg.env())
	}
	if o.OnStart != nil {
		info := StartInfo{}
		if o.MemoryBytes > 0 || o.CPUs > 0 {
			info.Limits = "sentry"
			if cg != nil {
				info.Limits += " + " + cg.desc
			}
		}
		o.OnStart(info)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		// Signals from the terminal reach this process only; it forwards
		// them, so the guest sees each once.
		Setpgid: true,
	}
	if err := cmd.Start(); err != nil {
		syncR.Close()
		if cg != nil {
			cg.remove()
		}
		return 0, fmt.Errorf("start sandbox supervisor: %w", err)
	}
	syncR.Close()
	if cg != nil {
		// Before the go-ahead: everything the supervisor starts inherits
		// the cgroup. The supervisor removes it at the end.
		if err := cg.add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			cg.remove()
			return 0, fmt.Errorf("-m/--cpus: host cgroup: %w", err)
		}
	}
	if o.Lockdown {
		lockdown := Lockdown
		if nat != nil {
			lockdown = LockdownNAT
		}
		if err := lockdown(ep.state, cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, fmt.Errorf("lock down: %w", err)
		}
	}
	if _, err := syncW.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("start sandbox supervisor: %w", err)
	}
	if nat != nil {
		go nat.serveOrReport(cmd.Stderr)
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return exitCode(cmd.ProcessState), ctx.Err()
		case err := <-done:
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return 0, err
			}
			return exitCode(cmd.ProcessState), nil
		}
	}
}

// exitCode maps a wait status to a shell-style exit code.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 255
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// unlessRegular hides a regular file behind a plain io.Writer so that
// os/exec copies to it through a pipe.
func unlessRegular(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return struct{ io.Writer }{f}
		}
	}
	return w
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
