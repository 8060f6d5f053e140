// Package volume serves ext4lite volumes to gVisor's Sentry: a lisafs
// server (Conn, controlFD, openFD over ext4lite's inode API) plugged into
// runsc's gofer through runsc/fsgofer/extension.
//
// The runtime marks a volume mount with Annotations: a bind mount whose
// source is the volume file and our dev.gvx.volume.N description. runsc
// runs with --directfs=false (every operation on the mount is an RPC to
// the gofer) and --file-access-mounts=exclusive (the Sentry caches the
// volume's pages, so files on it can be memory-mapped and executed). In
// the gofer, PrepareGofer opens the file
// where the gofer bind-mounted it, before the gofer chroots, drops
// capabilities and installs its seccomp filter (SeccompRules adds what
// ext4lite needs: pread64, pwrite64, fsync, …); TryHandleMount opens the
// filesystem on that file and claims the mount. No host FD is handed to
// the Sentry: every file operation is an RPC answered by ext4lite, so
// ownership, xattrs, whiteout devices and hard links live in the volume's
// own inodes, as root or rootless.
//
// Durability: the Sentry writes dirty pages back on fsync, when it evicts
// them and when it tears the mount down (the episode ends, gracefully or
// not, as long as the Sentry is not SIGKILLed). ext4lite syncs its metadata
// on fsync, every SyncEvery while dirty and when the Sentry releases the
// mount; then the volume is closed. A SIGKILLed episode loses what the
// Sentry still cached plus at most the last SyncEvery of metadata, and
// leaves a journal that ext4lite, the kernel and e2fsck replay.
//
// Usage, in the binary that embeds runsc, before maincli.Main:
//
//	volume.Register()
package volume
