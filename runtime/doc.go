// Package runtime runs gvx episodes: one OCI image in one gVisor sandbox,
// with ext4lite volumes, as one unprivileged process tree that leaves
// nothing behind. It is the library behind `rungv run`.
//
// # What it promises
//
//   - The rootfs is the image flattened into a flat-plain EROFS file
//     (package image, content-addressed cache), mounted by the Sentry
//     natively with a writable layer in memory: nothing is mounted on the
//     host, no gofer serves the rootfs.
//   - Entrypoint, command, environment, working directory and user merge
//     with the image's configuration as docker run merges them.
//   - Works as root and as any user: the episode runs in a user and
//     network namespace of its own (uid 0 there is the caller), with lo up
//     and no host interface; runsc never touches cgroups
//     (--ignore-cgroups). Memory and CPUs the guest sees come from the
//     Sentry's own flags; where the caller may, the episode also runs in a
//     host cgroup with the same limits, removed when it ends.
//   - Networking (spec.Spec.Network): NetworkNone gives loopback only;
//     NetworkNAT gives slirp's 10.0.2.15/24 with outbound TCP and UDP
//     through the calling process's own sockets (a gVisor netstack on the
//     host side of a veth pair; LockdownNAT then allows those sockets),
//     to the outside world only unless the spec's Egress and
//     AllowHostPorts open more (package runtime/egress), with relays and
//     their buffers capped (NATMaxRelays).
//   - Nothing is left: the state directory, sandbox, gofer and every
//     helper go when the episode ends, and when the caller is SIGKILLed
//     (a supervisor watches a pipe from the caller; the episode's init is
//     PID 1 of its own PID namespace).
//   - Every host process that outlives the setup locks itself down (see
//     "Lockdown" below); the calling process does so unless the spec's
//     Lockdown is spec.LockdownOff.
//   - Volumes (MountVolume) are ext4 files served by ext4lite inside
//     runsc's gofer (package runtime/volume): guest writes land in that
//     one file; after the guest exits or is stopped with SIGTERM/SIGINT
//     the gofer syncs and closes it before the episode ends. Files on a
//     volume can be memory-mapped and executed (exclusive file access),
//     so a Docker daemon can keep its whole /var/lib/docker there.
//
// # Process tree
//
//	rungv run                 the host side; profile "host" (or "host-nat")
//	└─ rungv _gvx-supervise   new user+net namespace, lo up; profile "supervisor"
//	   └─ rungv _gvx-init     PID 1 of a new PID namespace, own /proc; profile "init"
//	      ├─ runsc-sandbox    (runsc run --detach, then re-parented here)
//	      └─ runsc-gofer      (only with volumes or bind mounts)
//
// # Lockdown
//
// Each of rungv's three host processes, once its setup is done, drops
// every capability it does not need (bounding, ambient, inheritable,
// effective, permitted; on every thread), becomes non-dumpable (no
// /proc/PID/mem, ptrace or process_vm_* from a process without
// CAP_SYS_PTRACE over it: for the supervisor and init that includes the
// gofer, uid 0 of their user namespace), sets no_new_privs, where asked
// confines paths with Landlock, and installs a seccomp ALLOWLIST: what is
// not listed fails with EPERM (clone3: ENOSYS), another ABI kills. See
// lockdown_linux.go and docs/runtime.md ("Self-lockdown") for the lists.
//
//   - host side, after starting the supervisor: waits, forwards signals
//     (pidfd), copies stdio, accepts on listeners it opened before, removes
//     the state directory; with NAT also inet stream/datagram sockets and
//     connect (LockdownNAT). No capability. Landlock: only the state
//     directory.
//   - supervisor, after starting init: waits, signals init, removes the
//     state directory and leaves its cgroups through cgroup.procs files it
//     opened before; dials unix stream sockets only while it serves
//     published TCP ports. Landlock: reads only the state directory. As
//     root with a host cgroup it keeps CAP_DAC_OVERRIDE, only where
//     Landlock holds it to removing directories beneath the state and
//     cgroups' parents.
//   - init, after runsc run --detach: waits and reaps, signals the guest
//     over one control connection to the sandbox opened before (the call
//     runsc kill makes, no exec), SIGKILLs the sandbox when that fails. No
//     socket, no path (Landlock with no rule), no capability.
//
// Everywhere: clone only for threads, openat read-only and never creating,
// fcntl without F_SETOWN/F_SETSIG, kill and tgkill only to itself and its
// named children, prctl only
// PR_SET_VMA, no io_uring, pidfd_open/getfd, process_vm_*, ptrace, exec,
// mounts, namespaces, bpf, perf, userfaultfd, keys, ioctl, mknod. What
// remains open: the caller's uid owns the episode's user namespace and so
// can still write the supervisor's and init's memory from the host's user
// namespace; without Landlock nothing is confined by path; with NAT the
// host side dials wherever the NAT's forwarders are let dial.
//
// # Where things are
//
// One episode is one plan (plan_linux.go): Run validates the spec.Spec,
// adds the Host's side and what the host resolves (isolation, network),
// prepare fills in the bundle, rootfs, mounts and the OCI spec
// (ocispec.go, written to the bundle for runsc), and runsc's argv is made
// from the plan only where runsc starts: runSupervised (namespaces: the
// supervisor and init get their share as one JSON value, nsEpisode) or
// runDirect (seccomp-only, direct_linux.go: in stages). Around it:
//
//	runtime/volume     ext4lite volumes served over lisafs (the gofer's extension, or this process)
//	runtime/egress     the NAT's egress policy
//	runtime/lockdown   Landlock, dropping capabilities, the seccomp assembler (the profiles and
//	                   their allowlists are lockdown_linux.go's)
//	runtime/cgroup     the episode's host cgroup
//	runtime/dind       what a Docker daemon needs in the Sentry
//	runtime/net        package episodenet: the NAT, published ports and the in-guest relay;
//	                   it trusts nothing from the guest and is handed what the plan says
//	                   (NATConfig, the spec's ports); this package starts and locks down
//	                   the processes that run it
//	runtime/checkpoint checkpoint, restore, fork (seccomp-only): the directory, save, control
//	                   (checkpoint_linux.go here: what needs the plan)
//
// The binary is three programs in one; its main must call Main first.
//
// Example (a main package):
//
//	func main() {
//		runtime.Main(func() {
//			s := spec.New("oci:/srv/images/busybox")
//			s.Args = []string{"echo", "hi"}
//			code, err := runtime.Run(ctx, s, runtime.Host{})
//			...
//		})
//	}
package runtime
