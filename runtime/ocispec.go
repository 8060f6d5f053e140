package runtime

import (
	"fmt"
	"io"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"z.gfire.dev/gvx/runtime/dind"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/spec"
)

// Annotations that make the Sentry mount the rootfs from an EROFS file with
// a writable layer in memory.
const (
	annRootfsSource  = "dev.gvisor.spec.rootfs.source"
	annRootfsType    = "dev.gvisor.spec.rootfs.type"
	annRootfsOverlay = "dev.gvisor.spec.rootfs.overlay"
)

// defaultPath is what docker puts in PATH when the image sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultCaps is docker's default capability set.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCaps is every capability Linux 6.x knows: what --privileged gives.
// Inside gVisor they are the Sentry's capabilities, not the host's.
var allCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// processArgs merges entrypoint and command as docker run does: an
// explicit entrypoint drops the image's Cmd; arguments replace the Cmd.
func processArgs(o *spec.Spec, img *Image) ([]string, error) {
	entry := img.Config.Entrypoint
	cmd := img.Config.Cmd
	if o.Entrypoint != nil {
		entry = o.Entrypoint
		cmd = nil
	}
	if len(o.Args) > 0 {
		cmd = o.Args
	}
	args := append(append([]string{}, entry...), cmd...)
	if len(args) == 0 {
		return nil, ErrNoCommand
	}
	return args, nil
}

// dindArgs adds what a Docker daemon needs in the Sentry (dind.Args) to a
// privileged episode's command, and --tls=false when its environment env
// and the image's /etc/docker/daemon.json (read from src, which may be
// nil) set no TLS up (dind.ArgsEnv: a plain-TCP dockerd otherwise sleeps
// 15 s before it serves); an unprivileged one cannot run dockerd and is
// left alone.
func dindArgs(args []string, privileged bool, env []string, src sink.Source) []string {
	if !privileged || !dind.IsDaemon(args) {
		return args
	}
	return dind.ArgsEnv(args, env, daemonJSON(src))
}

// daemonJSON is the image's /etc/docker/daemon.json (at most 1 MiB read),
// or nil.
func daemonJSON(src sink.Source) []byte {
	if src == nil {
		return nil
	}
	rc, err := src.Open("etc/docker/daemon.json")
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return b
}

// isDindDaemon reports whether a privileged episode's command starts a
// Docker daemon the way docker:dind does (dind.IsDaemon).
func isDindDaemon(args []string, privileged bool) bool {
	return privileged && dind.IsDaemon(args)
}

// sandboxSocketFlags are the sockets o asks for (NetRaw,
// AllowPacketSocketWrite); a Docker daemon (isDindDaemon) gets both,
// because:
//
//   - --net-raw: in each container's network namespace dockerd runs
//     iptables to DNAT 127.0.0.11:53 to its embedded DNS server (it does
//     so even with --iptables=false), and iptables talks to the netstack
//     over a raw socket. Without one: "can't initialize iptables table
//     `filter'", and service names on user-defined networks (Compose's
//     default) do not resolve.
//   - --allow-packet-socket-write: Docker 28 announces each container's
//     addresses (gratuitous ARP, unsolicited NA) over AF_PACKET; without
//     it every container start fails: "failed to add interface vethX to
//     sandbox: failed to advertise addresses: operation not supported".
//
// Both act on the Sentry's netstack only: the host sees nothing but the
// episode's network interface, whose traffic the NAT's policy decides.
func sandboxSocketFlags(o *spec.Spec, img *Image) socketFlags {
	args, err := processArgs(o, img)
	// A daemon image's episode whose command starts dockerd from a script
	// (dockerdShim) needs the same.
	dind := err == nil && (isDindDaemon(args, o.Privileged) || o.Privileged && dindImage(img))
	return socketFlags{netRaw: o.NetRaw || dind, packetWrite: o.AllowPacketSocketWrite || dind}
}

// flags are f as runsc's flags.
func (f socketFlags) flags() []string {
	var flags []string
	if f.netRaw {
		flags = append(flags, "--net-raw")
	}
	if f.packetWrite {
		flags = append(flags, "--allow-packet-socket-write")
	}
	return flags
}

// mergeEnv returns the image's environment overridden by extra, with PATH,
// HOSTNAME and HOME filled in as docker does.
func mergeEnv(imageEnv, extra []string, hostname, home string) []string {
	var order []string
	vals := map[string]string{}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = kv
	}
	set(defaultPath)
	set("HOSTNAME=" + hostname)
	for _, kv := range imageEnv {
		set(kv)
	}
	for _, kv := range extra {
		set(kv)
	}
	if _, ok := vals["HOME"]; !ok {
		if home == "" {
			home = "/"
		}
		set("HOME=" + home)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, vals[k])
	}
	return out
}

// buildOCISpec makes the OCI runtime spec of an episode (what runsc
// boots; spec.Spec is the episode's own description). src reads the image
// (for /etc/passwd and /etc/group); rootDir is the empty directory standing
// in for the rootfs.
func buildOCISpec(o *spec.Spec, img *Image, src sink.Source, rootDir, hostname string) (*specs.Spec, error) {
	args, err := processArgs(o, img)
	if err != nil {
		return nil, err
	}
	userSpec := o.User
	if userSpec == "" {
		userSpec = img.Config.User
	}
	u, err := resolveUser(src, userSpec)
	if err != nil {
		return nil, err
	}
	home := u.Home
	if home == "" && u.UID == 0 {
		home = "/root"
	}
	cwd := o.Workdir
	if cwd == "" {
		cwd = img.Config.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	if !path.IsAbs(cwd) {
		return nil, fmt.Errorf("%w: the working directory %q is not absolute", ErrBadOption, cwd)
	}
	set := defaultCaps
	if o.Privileged {
		set = allCaps
	}
	caps := &specs.LinuxCapabilities{Bounding: set}
	if u.UID == 0 {
		caps.Effective, caps.Permitted = set, set
	}
	env := mergeEnv(img.Config.Env, o.Env, hostname, home)
	args = dindArgs(args, o.Privileged, env, src)
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:         specs.User{UID: u.UID, GID: u.GID, AdditionalGids: u.Groups},
			Args:         args,
			Env:          env,
			Cwd:          path.Clean(cwd),
			Capabilities: caps,
			Rlimits:      []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1048576, Soft: 1048576}},
		},
		Root:     &specs.Root{Path: rootDir},
		Hostname: hostname,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=67108864"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Annotations: map[string]string{}, // the plan's (writeBundle)
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: "/proc/self/ns/net"},
			},
		},
	}
	if o.Privileged {
		// The Sentry's own cgroupfs (never the host's): dockerd needs it.
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev"}})
	}
	for i, m := range o.Mounts {
		if m.Type == MountVolume {
			continue // added by planMounts, which knows the state directory
		}
		sm, err := ociMount(m)
		if err != nil {
			return nil, fmt.Errorf("mounts[%d].type: %w", i, err)
		}
		s.Mounts = append(s.Mounts, sm)
	}
	return s, nil
}

// ociMount turns a Mount into an OCI spec mount.
func ociMount(m Mount) (specs.Mount, error) {
	opts := []string{"rw"}
	if m.ReadOnly {
		opts = []string{"ro"}
	}
	switch m.Type {
	case MountTmpfs:
		return specs.Mount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: append(opts, "nosuid", "nodev")}, nil
	case MountBind:
		// rprivate, docker run -v's default: init's copy of the host's
		// mounts is a slave (a host unmount reaches it), but a mount the
		// host makes later below a bound directory stays out of the
		// episode (runsc's gofer makes its binds slaves unless told).
		return specs.Mount{Destination: m.Target, Type: "bind", Source: m.Source, Options: append(opts, "rbind", "rprivate")}, nil
	}
	return specs.Mount{}, fmt.Errorf("%w: mount type %q", ErrUnsupported, m.Type)
}

// dindImage reports whether img is a Docker daemon image: its own
// entrypoint (or, without one, its command) starts a daemon, as
// docker:dind's dockerd-entrypoint.sh does.
func dindImage(img *Image) bool {
	first := img.Config.Entrypoint
	if len(first) == 0 {
		first = img.Config.Cmd
	}
	return len(first) > 0 && dind.IsDaemonCommand(first[0])
}

// shimPath is where dockerdShim puts its dockerd: first on docker:dind's
// PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:…), ahead of the image's
// own dockerd.
const shimPath = "/usr/local/sbin/dockerd"

// dockerdShim is, for a privileged episode of a daemon image (dindImage)
// whose command does not start the daemon itself but, say, a shell line
// that does (`sh -c "dockerd-entrypoint.sh --tls=false & …"`, the seeds'
// Go example), a dockerd at shimPath that runs the image's own with
// whichever of dind.Flags its command line does not set, and
// --tls=false when neither that command line nor the daemon's environment
// sets TLS up (dind.WantsNoTLS, decided in the guest): dindArgs cannot
// reach a daemon a script starts. Nothing when the command is the daemon
// (dindArgs added the flags), when the image has something at shimPath
// already, no dockerd where docker:dind and Debian keep it, or a
// daemon.json that sets iptables itself (dockerd refuses a directive given
// both ways).
func dockerdShim(o *spec.Spec, img *Image, src sink.Source) *upperFile {
	if !o.Privileged || src == nil || !dindImage(img) {
		return nil
	}
	if args, err := processArgs(o, img); err != nil || dind.IsDaemon(args) {
		return nil
	}
	if _, err := src.Lstat(strings.TrimPrefix(shimPath, "/")); err == nil {
		return nil
	}
	dj := daemonJSON(src)
	if strings.Contains(string(dj), "iptables") {
		return nil
	}
	real := ""
	for _, p := range []string{"/usr/local/bin/dockerd", "/usr/bin/dockerd", "/usr/sbin/dockerd"} {
		if _, err := src.Lstat(strings.TrimPrefix(p, "/")); err == nil {
			real = p
			break
		}
	}
	if real == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# rungv: dockerd in gVisor's Sentry needs these flags (docs/dind.md);\n# a flag the command line gives wins.\n")
	var vars []string
	for i, f := range dind.Flags {
		name, _, _ := strings.Cut(f, "=")
		v := fmt.Sprintf("f%d", i)
		vars = append(vars, "$"+v)
		fmt.Fprintf(&b, "%s=%s\n", v, f)
		fmt.Fprintf(&b, "for a; do case \"$a\" in %s|%s=*) %s=;; esac; done\n", name, name, v)
	}
	if !strings.Contains(string(dj), "tls") {
		// dind.WantsNoTLS, decided on the daemon's own command line and
		// environment: a plain-TCP dockerd sleeps 15 s without it.
		fmt.Fprintf(&b, "tls=%s\n", dind.NoTLS)
		b.WriteString("for a; do case \"$a\" in --tls*|--config-file*) tls=;; esac; done\n")
		b.WriteString("[ -n \"${DOCKER_TLS_CERTDIR:-}${DOCKER_TLS_VERIFY:-}${DOCKER_CERT_PATH:-}\" ] && tls=\n")
		vars = append(vars, "$tls")
	}
	fmt.Fprintf(&b, "exec %s \"$@\" %s\n", real, strings.Join(vars, " "))
	return &upperFile{path: shimPath, mode: 0o755, body: b.String()}
}
