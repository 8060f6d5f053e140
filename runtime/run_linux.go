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
	"z.gfire.dev/gvx/internal/hostenv"
	"z.gfire.dev/gvx/runtime/cgroup"
	episodenet "z.gfire.dev/gvx/runtime/net"
	"z.gfire.dev/gvx/runtime/volume"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/spec"
)

// forwarded are the signals rungv passes on to the guest.
var forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

// Run runs one episode to completion and returns the guest's exit code
// (128+N when the guest was killed by signal N). It must be called from the
// rungv binary (a program that calls Main first): the sandbox is run by
// re-executing /proc/self/exe. Cancelling ctx kills the episode.
//
// s describes the episode (it is validated first: spec.Spec.Validate); h
// is this host's side of it. The spec is not changed.
//
// Process tree: this process (the host side, locked down unless
// s.Lockdown is spec.LockdownOff) → a supervisor in a new user and network namespace
// (uid 0 there is the caller's uid; lo is brought up) → runsc run (attached:
// its sandbox and gofer die with it). The supervisor watches a pipe from
// this process: if this process dies, even by SIGKILL, the supervisor kills
// the sandbox and removes the episode's state directory.
func Run(ctx context.Context, s *spec.Spec, h Host) (int, error) {
	if builtWithCgo {
		return 0, errCgo
	}
	p, err := newPlan(s, h)
	if err != nil {
		return 0, err
	}
	// Caught from here on, so that SIGTERM or SIGINT during the set-up
	// does not end this process before it can remove what it made: they
	// wait in sigs until the episode runs (waitChild).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	sweepStale()
	if err := checkProfileDir(p.host.ProfileDir); err != nil {
		return 0, err
	}
	if err := pinHostCPUs(p.host.CPUs); err != nil {
		return 0, err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	state, lock, err := newStateDir(id)
	if err != nil {
		return 0, err
	}
	defer removeState(state)() // works after the lockdown too
	defer lock.Close()
	vols, err := openVolumes(p.spec.Mounts)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, f := range vols {
			f.Close()
		}
	}()
	pub, err := episodenet.Publish(p.spec.Ports)
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	if err := writeStateJSON(state, stateSockets, pub.Sockets()); err != nil {
		return 0, err
	}
	ep, err := prepare(ctx, p, state, id, vols)
	if err != nil {
		return 0, err
	}
	ep.lock, ep.sigs = lock, sigs
	return ep.run(ctx, p, pub, vols)
}

// checkProfileDir refuses a Host.ProfileDir ("" is none) that another
// user could write: the profile is created there by name (by this process
// or, in the namespaced mode, by runsc, which truncates and follows
// symlinks), so one who can add a symlink named like it could have an
// episode's profile written over a file of their choosing.
func checkProfileDir(dir string) error {
	if dir == "" {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("profile directory %s (Host.ProfileDir, RUNGV_PROFILE_DIR): %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("profile directory %s (Host.ProfileDir, RUNGV_PROFILE_DIR) is owned by uid %d, mode %#o: it must be a directory of yours (uid %d) that nobody else can write; make one with mkdir -m 0755",
			dir, st.Uid, st.Mode&0o7777, os.Geteuid())
	}
	return nil
}

// openVolumes opens each volume file once, for the episode's life, and
// that open file is what the gofer serves (init binds it into the state
// directory, see bindVolumes): nothing looks the path up again, so the
// file cannot be swapped for another (a symlink to the golden volume, say)
// between the check and the use.
//
//   - The last path component must not be a symlink (O_NOFOLLOW), and the
//     file must be a regular file owned by the caller, unless the mount
//     allows another owner (Mount.AllowForeignOwner).
//   - Its advisory lock (ext4lite.LockFile) is exclusive for a read-write
//     mount and shared for a read-only one: a volume another episode or a
//     gvx-vol command is writing is refused before anything starts (two
//     writers would corrupt it).
//
// The files stay open, locked, until the caller closes them.
func openVolumes(ms []Mount) (files []*os.File, err error) {
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			files = nil
		}
	}()
	for i, m := range ms {
		if m.Type != MountVolume {
			continue
		}
		f, err := openVolume(fmt.Sprintf("mounts[%d].source", i), m)
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// openVolume opens m's volume file; field is the spec's name of its
// source ("mounts[2].source"), for errors.
func openVolume(field string, m Mount) (*os.File, error) {
	flag := os.O_RDWR
	if m.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(m.Source, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: %s is a symbolic link: name the volume file itself", field, m.Source)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("%s: %s is not a regular file (an ext4 volume file)", field, m.Source)
	}
	if int(st.Uid) != os.Getuid() && !m.AllowForeignOwner {
		f.Close()
		return nil, fmt.Errorf("%s: %s belongs to uid %d, not to the caller (uid %d): chown it, or allow it if it is meant to be shared (the mount's allow_foreign: --mount …,allow-foreign)", field, m.Source, st.Uid, os.Getuid())
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	if err := ext4lite.LockFile(f, !m.ReadOnly); err != nil {
		f.Close()
		if errors.Is(err, ext4lite.ErrInUse) {
			return nil, fmt.Errorf("%s: %s is in use by another episode or a gvx-vol command", field, m.Source)
		}
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return f, nil
}

// episode is a prepared episode as this process runs it: the plan, and
// the handles of the process tree.
type episode struct {
	*plan
	lock *os.File       // the state directory's, for the supervisor
	sigs chan os.Signal // rungv's signals, caught since Run began
	ctx  context.Context
}

// prepare resolves the image and fills in the plan: the rootfs, the
// mounts, the OCI spec (written to the bundle's config.json for runsc),
// the sandbox's settings. vols are openVolumes' files, in mount order.
func prepare(ctx context.Context, p *plan, state, id string, vols []*os.File) (*episode, error) {
	o := p.spec
	p.id, p.state, p.bundle = id, state, filepath.Join(state, "bundle")
	img, err := resolveImage(ctx, o.Image, o.Pull, p.host.CacheDir, state)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(img.RootfsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkExecMount(f, img.RootfsPath, p.host.CacheDir); err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var src sink.Source
	if im, err := erofs.Open(f, st.Size()); err == nil {
		src = im
	}
	rootDir := filepath.Join(p.bundle, "rootfs")
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		return nil, err
	}
	p.rootfs = rootfsPlan{image: img.RootfsPath, overlay: true}
	if p.oci, err = buildOCISpec(o, img, src, rootDir, id); err != nil {
		return nil, err
	}
	guestArgs := p.oci.Process.Args // before a relay goes in front
	if err := p.planMounts(vols); err != nil {
		return nil, err
	}
	if len(o.Ports) > 0 {
		// The relay is this binary, copied into a read-only EROFS image of
		// its own (episodenet.RelayImage); the ports' descriptors are donated at
		// start (episodenet.Publish).
		if p.relay, err = episodenet.RelayImage(img.cache); err != nil {
			return nil, err
		}
		p.oci.Mounts = append(p.oci.Mounts, specs.Mount{Destination: episodenet.GuestRelayDir, Type: "erofs", Source: p.relay, Options: []string{"ro"}})
		p.oci.Process.Args = append(append(append([]string{episodenet.GuestRungv, episodenet.RelayCmd}, episodenet.RelaySpecs(p.spec.Ports)...), "--"), p.oci.Process.Args...)
	}
	p.sockets = sandboxSocketFlags(o, img)
	var upper []upperFile
	if p.network == NetworkNAT {
		upper = append(upper, upperFile{path: "/etc/resolv.conf", mode: 0o644, body: episodenet.ResolvConf})
	}
	if shim := dockerdShim(o, img, src); shim != nil {
		upper = append(upper, *shim)
	}
	if p.rootfs.upperTar, err = writeUpperTar(p.bundle, upper); err != nil {
		return nil, err
	}
	if p.host.RestoreFrom == "" {
		if err := lookupExec(src, guestArgs[0], p.oci.Process.Env, p.oci.Process.Cwd, shadowedBy(p.oci.Mounts, upper)); err != nil {
			return nil, err
		}
	}
	if err := p.writeBundle(); err != nil {
		return nil, err
	}
	return &episode{plan: p}, nil
}

// planMounts adds the spec's bind and volume mounts to the plan (buildOCISpec
// made the others). A volume's OCI mount binds the volume file as init
// bound it into the state directory (bindVolumes: the file opened by
// openVolumes, never the path again); runsc's gofer mounts it at the
// destination in its root, where the extension opens it before locking
// down, and serves the filesystem inside it. The seccomp-only path serves
// the opened file itself (runDirect).
func (p *plan) planMounts(vols []*os.File) error {
	for i, m := range p.spec.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		switch m.Type {
		case MountBind:
			if _, err := os.Stat(m.Source); err != nil {
				return fmt.Errorf("%s.source: %w", field, err)
			}
		case MountVolume:
			n := len(p.volumes)
			if n >= len(vols) {
				return fmt.Errorf("rungv: internal: %s: no open volume file", field)
			}
			v := volumePlan{field: field, target: m.Target, source: m.Source, bind: volumeBindPath(p.state, n),
				readOnly: m.ReadOnly, maxOpen: m.MaxOpen, episode: m.Durability == spec.DurabilityEpisode, file: vols[n]}
			if err := os.MkdirAll(filepath.Dir(v.bind), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(v.bind, nil, 0o600); err != nil {
				return err
			}
			opt := "rw"
			if v.readOnly {
				opt = "ro"
			}
			p.oci.Mounts = append(p.oci.Mounts, specs.Mount{Destination: v.target, Type: "bind", Source: v.bind,
				Options: []string{opt, "rbind", "dcache=" + strconv.FormatInt(volumeDentryCache(v.maxOpen), 10)}})
			p.volumes = append(p.volumes, v)
		}
	}
	return nil
}

// volumeDentryCacheMax is how many unused dentries the Sentry keeps cached
// on a volume mount (the gofer filesystem's per-mount "dcache" option;
// gVisor's default is 1,000). A volume is exclusive, so a cached dentry
// stays right, but one that is evicted takes its attributes, its cached
// pages and its negative children with it, and the next stat or open is
// a Walk and an OpenAt again: Python's import of a 1,000-module package
// (a .py, a __pycache__ entry and a .pyc per module) overflowed 1,000
// and re-walked every file on the next interpreter's import (2 Walks, an
// OpenAt and a PRead per module, 7,459 RPCs; bench/volume.sh). Each cached
// dentry holds one control FD on the volume server (a map entry and an
// inode reference, counted against max-open); clean cached pages stay
// evictable by the Sentry's memory file as before.
const volumeDentryCacheMax = 16384

// volumeDentryCache is the dcache option of a volume whose server allows
// maxOpen FDs (0: volume.DefaultMaxOpen): volumeDentryCacheMax, at most a
// quarter of maxOpen. A cached dentry holds up to two FDs on the server
// (its control FD and the open handle the Sentry keeps for reads), so the
// cache takes at most half of max-open and leaves the rest to the guest's
// open files and their directories. gVisor's fixed default of 1,000 took
// 2,000 of a max-open=1000 volume and the guest's opens failed with
// ENFILE once it had touched a thousand files (TestVolumeDentryCache).
func volumeDentryCache(maxOpen int64) int64 {
	if maxOpen <= 0 {
		maxOpen = volume.DefaultMaxOpen
	}
	return max(min(volumeDentryCacheMax, maxOpen/4), 1)
}

// writeBundle writes the OCI spec into the bundle, for runsc, with the
// annotations runsc's processes read there (the Sentry its rootfs and
// first files, the gofer's extension its volumes, the sandbox's boot its
// memory and CPUs: patchBootArgs). Nothing in this process reads them
// back: it has the plan.
func (p *plan) writeBundle() error {
	a := p.oci.Annotations
	a[annRootfsSource], a[annRootfsType] = p.rootfs.image, "erofs"
	a[annRootfsOverlay] = "none"
	if p.rootfs.overlay {
		a[annRootfsOverlay] = "memory"
	}
	if p.rootfs.upperTar != "" {
		a[annRootfsUpperTar] = p.rootfs.upperTar
	}
	for i, v := range p.volumes {
		for k, val := range volume.Annotations(i, p.volumeMount(v)) {
			a[k] = val
		}
	}
	if l := p.spec.Limits; l.MemoryBytes > 0 {
		a[annTotalMemory] = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if n := p.cpuNum(); n > 0 {
		a[annCPUNum] = strconv.Itoa(n)
	}
	if len(p.volumes) > 0 {
		shareBindMounts(p.oci, p.volumes)
	}
	js, err := json.MarshalIndent(p.oci, "", "  ")
	if err != nil {
		return err
	}
	p.ociJSON = js
	return os.WriteFile(filepath.Join(p.bundle, "config.json"), js, 0o644)
}

// volumeMount is how package volume takes v.
func (p *plan) volumeMount(v volumePlan) volume.Mount {
	return volume.Mount{Source: v.bind, Name: v.source, Target: v.target, ReadOnly: v.readOnly, MaxOpen: v.maxOpen, NoHostSync: v.episode}
}

// cpuNum is the number of CPUs the guest sees: the spec's limits.cpus
// rounded up; 0 for the host's.
func (p *plan) cpuNum() int {
	c := p.spec.Limits.CPUs
	n := int(c)
	if float64(n) < c {
		n++
	}
	return n
}

// runscRoot is runsc's state directory (--root), in the episode's.
func (p *plan) runscRoot() string { return filepath.Join(p.state, "runsc") }

// runscGlobals are runsc's global flags for the plan: the one place where
// the plan becomes runsc's command line, for the namespaced path's runsc
// run (runSupervised) and the seccomp-only path's runsc boot (runDirect).
func (p *plan) runscGlobals() []string {
	args := []string{
		"--root=" + p.runscRoot(),
		"--ignore-cgroups",
	}
	args = append(args, episodenet.RunscFlags(p.network)...)
	if p.rootfs.upperTar != "" {
		args = append(args, allowRootfsTar)
	}
	if p.spec.Platform != "" {
		args = append(args, "--platform="+string(p.spec.Platform))
	}
	args = append(args, p.sockets.flags()...)
	if p.spec.AllowSUID {
		args = append(args, "--allow-suid")
	}
	if inGVisor() {
		args = append(args, nestedRunscFlags...)
	}
	if HasGVisorPatch(nativeCPUIDPatch) {
		args = append(args, nativeCPUIDFlag)
	}
	if len(p.volumes) > 0 {
		args = append(args, volumeRunscFlags...)
	}
	if p.host.DebugLogDir != "" {
		args = append(args, "--debug", "--debug-log="+filepath.Clean(p.host.DebugLogDir)+"/")
	}
	if p.host.ProfileDir != "" {
		args = append(args, "--profile")
		if p.isolation != IsolationSeccompOnly {
			// runsc run opens it and donates it to its sandbox; the
			// seccomp-only path's boot gets a descriptor (profileFlags).
			args = append(args, "--profile-cpu="+p.profilePath())
		}
	}
	return args
}

// volumeStatsPath is where volume v's request counters go
// (Host.ProfileDir) when this process serves it (seccomp-only):
// <id>.volume-N.json, N its index among the volumes.
func (p *plan) volumeStatsPath(v volumePlan) string {
	n := 0
	for i, w := range p.volumes {
		if w.target == v.target {
			n = i
		}
	}
	return filepath.Join(p.host.ProfileDir, p.id+".volume-"+strconv.Itoa(n)+".json")
}

// profilePath is where the Sentry's CPU profile goes (Host.ProfileDir).
func (p *plan) profilePath() string {
	return filepath.Join(p.host.ProfileDir, p.id+".cpu.pprof")
}

// nativeCPUIDPatch gives runsc nativeCPUIDFlag, which leaves the guest's
// cpuid instructions native: with CPUID faulting on, each one was a trap
// and a round trip to the Sentry, about 68 per start of a glibc program
// (patches/gvisor/0016-systrap-native-cpuid.patch; the guest then sees
// the host's CPUID, as under gVisor on hosts without CPUID faulting).
const (
	nativeCPUIDPatch = "0016-systrap-native-cpuid"
	nativeCPUIDFlag  = "--systrap-disable-cpuid-faulting"
)

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

// shareBindMounts gives every host bind mount of oci a share=shared hint:
// with --file-access-mounts=exclusive (volumeRunscFlags) the Sentry would
// otherwise cache them as if nothing outside changed them, and a file the
// host adds to a bind-mounted directory would stay invisible in the guest.
// Volume mounts (binds of the volume files, at the targets of vols) get
// none: they must be exclusive.
func shareBindMounts(oci *specs.Spec, vols []volumePlan) {
	isVol := map[string]bool{}
	for _, v := range vols {
		isVol[v.target] = true
	}
	seen := map[string]bool{}
	for _, m := range oci.Mounts {
		if m.Type != "bind" || isVol[m.Destination] || seen[m.Source] {
			continue // runsc refuses two hints for one source
		}
		seen[m.Source] = true
		name := "dev.gvisor.spec.mount.gvxbind" + strconv.Itoa(len(seen)) + "."
		oci.Annotations[name+"source"] = m.Source
		oci.Annotations[name+"type"] = "bind"
		oci.Annotations[name+"share"] = "shared"
	}
}

// run starts the episode in its isolation mode and waits for it.
func (ep *episode) run(ctx context.Context, p *plan, pub *episodenet.Publisher, vols []*os.File) (int, error) {
	ep.ctx = ctx
	var nat *episodenet.NAT
	var err error
	if p.network == NetworkNAT {
		if nat, err = newNAT(p); err != nil {
			return 0, err
		}
		defer nat.Close()
	}
	lim, err := newEpisodeLimits(ep.id, ep.state, p)
	if err != nil {
		return 0, err
	}
	lim.info.Isolation = p.isolation
	if p.host.OnStart != nil {
		p.host.OnStart(lim.info)
	}
	if p.isolation == IsolationSeccompOnly {
		defer lim.cg.RemoveWhenEmpty()
		return ep.runDirect(p, pub, nat, lim, func(pid int) error {
			if lim.cg != nil {
				if err := lim.cg.Add(pid); err != nil {
					return fmt.Errorf("limits: host cgroup: %w", err)
				}
			}
			if p.lockdown {
				prof := directProfile(nat != nil, ep.state, []int{pid}, pub.Dirs(), lim.cg.Dirs())
				if p.host.RestoreFrom != "" {
					// connect, no socket: the one socket made before for
					// the control server once restored (checkpoint.RedialControl).
					prof.extra = append(prof.extra, unix.SYS_CONNECT)
				}
				if err := lockdownAs(prof); err != nil {
					return fmt.Errorf("lock down: %w", err)
				}
			}
			pub.Serve()
			return nil
		})
	}
	return ep.runSupervised(p, pub, vols, nat, lim)
}

// newNAT makes the NAT's host side as the plan says (spec.Spec's Egress,
// AllowHostPorts, NATMaxRelays); a config it refuses is ErrBadOption.
func newNAT(p *plan) (*episodenet.NAT, error) {
	nat, err := episodenet.NewNAT(episodenet.NATConfig{Rules: p.egress, HostPorts: p.spec.AllowHostPorts, MaxRelays: p.spec.NATMaxRelays})
	if bad := (*episodenet.ConfigError)(nil); errors.As(err, &bad) {
		return nil, fmt.Errorf("%w: %w", ErrBadOption, err)
	}
	return nat, err
}

// hostLimits is what bounds one episode on the host, and how.
type hostLimits struct {
	cg   *cgroup.Episode // nil: none
	info StartInfo
	// pidsRlimit is the RLIMIT_NPROC to set where a user namespace of the
	// episode's own counts it (0: none).
	pidsRlimit int
}

// newEpisodeLimits makes the episode's host cgroup where it may and
// decides who enforces each limit, refusing (ErrLimits) what nothing
// would enforce unless the spec's limits policy is LimitsBestEffort. The cgroup's
// directories are recorded in the state directory (cgroups.json) before
// they are made, in every isolation mode: a start after the episode was
// killed removes them (sweepStale).
func newEpisodeLimits(id, state string, p *plan) (*hostLimits, error) {
	o := p.spec
	pids := p.pidsLimit()
	cg, err := cgroup.New(id, o.Limits.MemoryBytes, o.Limits.CPUs, max(pids, 0), func(dirs []string) error {
		return writeStateJSON(state, stateCgroups, dirs)
	})
	if err != nil {
		return nil, fmt.Errorf("limits: host cgroup: %w", err)
	}
	lim := &hostLimits{cg: cg, info: StartInfo{Enforcement: map[string]string{}}}
	refuse := func(err error) (*hostLimits, error) {
		cg.Remove()
		return nil, err
	}
	if pids > 0 {
		userns := p.isolation != IsolationSeccompOnly
		if userns {
			// RLIMIT_NPROC always (the kernel exempts only real root's
			// tasks from it, and a cgroup holds those).
			lim.pidsRlimit = pids
		}
		switch {
		case cg.Has("pids") && userns:
			lim.info.Enforcement["pids"] = cg.Version + " + rlimit (user namespace)"
		case cg.Has("pids"):
			lim.info.Enforcement["pids"] = cg.Version
		case !userns:
			// No user namespace of the episode's own: RLIMIT_NPROC would
			// count every process of the caller's uid (on the whole host,
			// in a container without a user namespace of its own).
			lim.info.Enforcement["pids"] = "none (seccomp-only without a host cgroup: the container's or pod's own pids limit applies)"
		case os.Getuid() == 0 && p.limitsPolicy() == LimitsBestEffort:
			lim.info.Enforcement["pids"] = "none (best effort: no pids cgroup, and the kernel exempts root from RLIMIT_NPROC)"
		case os.Getuid() == 0:
			return refuse(fmt.Errorf("%w: limits.pids: as root no pids cgroup can be made here (is a cgroup filesystem mounted?), and the kernel exempts root from RLIMIT_NPROC: run with a pids cgroup, or accept that with limits.policy best-effort (--limits best-effort), or no limit (limits.pids -1, --pids-limit -1)", ErrLimits))
		default:
			lim.info.Enforcement["pids"] = "rlimit (user namespace)"
		}
	}
	if o.Limits.MemoryBytes > 0 || o.Limits.CPUs > 0 {
		lim.info.Limits = "sentry"
		if cg != nil {
			lim.info.Limits += " + " + cg.Desc
		}
		unenforced := false
		for _, l := range []struct {
			name, ctrl string
			set        bool
		}{{"memory", "memory", o.Limits.MemoryBytes > 0}, {"cpus", "cpu", o.Limits.CPUs > 0}} {
			switch {
			case !l.set:
			case cg.Has(l.ctrl):
				lim.info.Enforcement[l.name] = cg.Version
			default:
				lim.info.Enforcement[l.name] = "sentry only (best effort)"
				unenforced = true
			}
		}
		if unenforced && p.limitsPolicy() != LimitsBestEffort {
			return refuse(fmt.Errorf("%w: limits.memory_bytes, limits.cpus: no host cgroup can be made here (not root, no delegated cgroup v2 subtree), so only the Sentry's own shaping would bound the episode: run as root or in a delegated cgroup, or accept that with limits.policy best-effort (--limits best-effort)", ErrLimits))
		}
	}
	return lim, nil
}

// setStdio gives cmd the episode's stdio.
func setStdio(cmd *exec.Cmd, o *Host) {
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
}

// runSupervised starts the supervisor (IsolationNamespaces) and waits for
// it: supervisorCmd is its command, startSupervisor starts it and gives it
// the go-ahead, then this process serves the NAT and the published ports.
func (ep *episode) runSupervised(p *plan, pub *episodenet.Publisher, vols []*os.File, nat *episodenet.NAT, lim *hostLimits) (int, error) {
	syncR, syncW, err := os.Pipe()
	if err != nil {
		lim.cg.Remove()
		return 0, err
	}
	defer syncW.Close()
	cmd := ep.supervisorCmd(p, pub, vols, nat, lim, syncR)
	if err := ep.startSupervisor(cmd, p, pub, nat, lim, syncR, syncW); err != nil {
		return 0, err
	}
	if nat != nil {
		go nat.ServeOrReport(cmd.Stderr)
	}
	pub.Serve()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The supervisor passes signals on to init, which keeps the guest's
	// stop timeout.
	return waitChild(ep.ctx, ep.sigs, cmd, done, -1, func(s unix.Signal) { _ = cmd.Process.Signal(s) })
}

// supervisorCmd is the supervisor's command: its environment (nsEpisode
// and what it passes on to init), the descriptors it inherits, in order
// (syncR, the NAT's child end at episodenet.NATFD, the published ports'
// guest ends, the volumes, the state lock), and its new user and network
// namespaces.
func (ep *episode) supervisorCmd(p *plan, pub *episodenet.Publisher, vols []*os.File, nat *episodenet.NAT, lim *hostLimits, syncR *os.File) *exec.Cmd {
	// The state directory after the verb names the episode for ps and
	// for whoever looks for its processes (nothing reads it back: the
	// supervisor takes its nsEpisode).
	cmd := exec.Command("/proc/self/exe", superviseCmd, p.state)
	setStdio(cmd, &p.host)
	cmd.ExtraFiles = []*os.File{syncR}
	if nat != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, nat.Child) // the supervisor's episodenet.NATFD
	}
	// Of the caller's environment only hostenv's allow-list: a token or
	// credential of the caller's stays with the caller (the guest's is
	// the spec's alone in any case).
	cmd.Env = append(hostenv.Filter(os.Environ()), nsEpisode{State: p.state, Runsc: p.runscGlobals(), Root: p.runscRoot(),
		Bundle: p.bundle, ID: "gvx-" + p.id, NAT: nat != nil, Keep: p.mountKeep()}.env())
	inherit(cmd, passFDsEnv, pub.GuestFiles())
	cmd.Env = append(cmd.Env, episodenet.PublishedSocketsEnv+"="+pub.SocketsEnv())
	inherit(cmd, volumeFDsEnv, vols)
	if len(vols) > 0 {
		var paths []string
		for _, m := range p.spec.Mounts {
			if m.Type == MountVolume {
				paths = append(paths, m.Source)
			}
		}
		js, _ := json.Marshal(paths)
		cmd.Env = append(cmd.Env, volumePathsEnv+"="+string(js))
	}
	cg := lim.cg
	if cg != nil {
		cmd.Env = append(cmd.Env, cg.Env()) // recorded in cgroups.json already (newEpisodeLimits)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, ep.lock) // held, unnamed, by the supervisor
	if lim.pidsRlimit > 0 {
		cmd.Env = append(cmd.Env, pidsLimitEnv+"="+strconv.Itoa(lim.pidsRlimit))
	}
	if p.host.StopTimeout != 0 {
		cmd.Env = append(cmd.Env, stopTimeoutEnv+"="+p.stopGrace().String()) // for init
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		// Signals from the terminal reach this process only; it forwards
		// them, so the guest sees each once.
		Setpgid: true,
	}
	return cmd
}

// startSupervisor starts cmd, puts it in the episode's host cgroup, locks
// this process down (spec.Spec.Lockdown) and only then gives the
// supervisor the go-ahead over syncW. On an error the supervisor has
// been killed and waited for (or never started).
func (ep *episode) startSupervisor(cmd *exec.Cmd, p *plan, pub *episodenet.Publisher, nat *episodenet.NAT, lim *hostLimits, syncR, syncW *os.File) error {
	cg := lim.cg
	if err := cmd.Start(); err != nil {
		syncR.Close()
		if cg != nil {
			cg.Remove()
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) {
			return fmt.Errorf("start sandbox supervisor: %w: this host does not let rungv make a user namespace: %s (--isolation auto picks seccomp-only where it cannot)", err, usernsHint(err))
		}
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("start sandbox supervisor: %w: this kernel refuses the user, network, PID and mount namespaces rungv makes: use --isolation auto or seccomp-only", err)
		}
		return fmt.Errorf("start sandbox supervisor: %w", err)
	}
	syncR.Close()
	pub.CloseGuestFiles() // the supervisor holds them now
	if cg != nil {
		// Before the go-ahead: everything the supervisor starts inherits
		// the cgroup. The supervisor removes it at the end.
		if err := cg.Add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			cg.Remove()
			return fmt.Errorf("limits: host cgroup: %w", err)
		}
	}
	if p.lockdown {
		if err := lockdownAs(hostProfile(nat != nil, ep.state, []int{cmd.Process.Pid}, pub.Dirs())); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("lock down: %w", err)
		}
	}
	if _, err := syncW.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("start sandbox supervisor: %w", err)
	}
	return nil
}

// checkExecMount refuses an image file on a noexec mount: the Sentry maps
// the image's programs straight from it (executable), so every guest
// program would die of SIGSEGV at its first instruction.
func checkExecMount(f *os.File, path, cacheDir string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return nil // cannot tell: let the guest try
	}
	if st.Flags&unix.ST_NOEXEC == 0 {
		return nil
	}
	where := "the image cache"
	if cacheDir != "" {
		where += " " + cacheDir
	}
	return fmt.Errorf("%w: %s is on a noexec mount (%s): the Sentry runs the image's programs from it; put %s on a mount that allows exec (--cache-dir or GVX_CACHE, e.g. a volume of the pod or container, or mount it without noexec: --tmpfs /tmp:exec)", ErrUnsupported, where, path, where)
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
