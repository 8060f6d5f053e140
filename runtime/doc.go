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
//   - Networking (Options.Network): NetworkNone gives loopback only;
//     NetworkNAT gives slirp's 10.0.2.15/24 with outbound TCP and UDP
//     through the calling process's own sockets (a gVisor netstack on the
//     host side of a veth pair; LockdownNAT then allows those sockets),
//     to the outside world only unless Options.Egress and
//     Options.AllowHostPorts open more (package runtime/egress), with
//     relays and their buffers capped (Options.NATMaxRelays).
//   - Nothing is left: the state directory, sandbox, gofer and every
//     helper go when the episode ends, and when the caller is SIGKILLed
//     (a supervisor watches a pipe from the caller; the episode's init is
//     PID 1 of its own PID namespace).
//   - With Options.Lockdown the calling process sets no_new_privs and a
//     seccomp filter (Lockdown) before guest code runs.
//   - Volumes (MountVolume) are ext4 files served by ext4lite inside
//     runsc's gofer (package runtime/volume): guest writes land in that
//     one file; after the guest exits or is stopped with SIGTERM/SIGINT
//     the gofer syncs and closes it before the episode ends. Files on a
//     volume can be memory-mapped and executed (exclusive file access),
//     so a Docker daemon can keep its whole /var/lib/docker there.
//
// # Process tree
//
//	rungv run (host side, locked down)
//	└─ rungv _gvx-supervise   new user+net namespace, lo up
//	   └─ rungv _gvx-init     PID 1 of a new PID namespace, own /proc
//	      ├─ runsc-sandbox    (runsc run --detach, then re-parented here)
//	      └─ runsc-gofer      (only with volumes or bind mounts)
//
// The binary is three programs in one; its main must call Main first.
//
// Example (a main package):
//
//	func main() {
//		runtime.Main(func() {
//			code, err := runtime.Run(ctx, runtime.Options{
//				Image: "oci:/srv/images/busybox", Args: []string{"echo", "hi"}, Lockdown: true,
//			})
//			...
//		})
//	}
package runtime
