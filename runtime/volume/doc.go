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
// A mount with NoHostSync (spec durability=episode) opens ext4lite with
// NoSync: a guest fsync still commits the journal into the volume file
// but skips the host fsync(2)s, so a killed sandbox loses nothing the
// guest fsynced (the host's page cache holds every completed pwrite) and
// only a host crash can.
//
// Counters: every request is counted by message type in a fixed array
// indexed by the handler's own lisafs.MID (never by what the Sentry
// sends), with PRead/PWrite bytes and the FSyncs' count and time
// (Volume.Stats). ServeStats keeps them in a file opened before any
// lockdown (seccomp-only episodes, Host.ProfileDir); the gofer, which
// sees no host path, logs the final ones to its runsc log.
//
// Speed: every guest operation on a volume is a lisafs RPC, so what the
// guest pays is the number of round trips times their latency, plus what
// the server does in between. The Sentry decides the count (busybox tar
// costs six per small file: unlink and walk, both ENOENT, create+open,
// write, chmod, utimes; dd bs=1M one PWrite per MiB, since a write to a
// page the Sentry has not cached goes straight to the server and
// MaxMessageSize carries up to 2 MiB - 4 KiB); the server keeps its part
// small: an FSync of a volume nothing changed since its last sync is
// answered at once (sync(2) becomes one FSync per open file), and new
// block-aligned data goes from the request's buffer to the volume file
// in one pwrite. BenchmarkServe measures the server over a real lisafs
// connection (profile it with -cpuprofile); bench/volume.sh the episode.
//
// No host FD for file data, by design. The Sentry uses a donated FD as
// the file itself (pread/pwrite/mmap at the file's offsets), but an
// ext4lite file is a list of extents inside the volume file, and Linux
// cannot open a byte range of a file as a file of its own: the only FD
// there is to give is the volume file's, where offset 0 is the
// superblock. Donating it would be wrong (the Sentry would write file data
// over metadata) and unsafe (a guest that took over the Sentry would hold
// every inode, directory and the journal of the volume, and could change
// them under ext4lite's feet, which the journal's crash guarantee and
// e2fsck's verdict assume nobody does). A memfd copy per open file would
// make opens cost a copy and memory the gofer cannot bound. So the mount
// has no host FDs, the Sentry caches pages itself (exclusive mode) and
// moves data by PRead/PWrite.
//
// Trust boundary: the Sentry is the server's only client, and a guest
// that took it over can send any lisafs message with any arguments, in any
// order, on any FD number. The server is the next wall, so it must be no
// softer than the Sentry: every request is answered from the volume's own
// inodes through ext4lite (which validates names, sizes and offsets), no
// host path is ever opened by name and no host FD is ever handed out, a
// connection mounts once and holds at most MaxOpen FDs besides its root
// and MaxDirents bytes of directory listings, a response fits one message
// whatever the count asked for, a read-only mount writes nothing, and the
// volume is closed only when the last FD is released, so whatever
// the requests were, the unmount leaves a volume that ext4lite's Check
// and e2fsck -fn pass. FuzzServe plays that client over a real lisafs
// connection (every request type, hostile FDs, names, offsets, counts,
// modes and xattrs; invariants: no handler panic, no hang, bounded heap,
// no host FD, FDs within MaxOpen, a clean volume at the end);
// TestHostileServerOpensNoPath serves its seeds under a seccomp filter
// that kills the process at any path or socket syscall; the TestHostile*
// tests name what it and reading the code found. One panic is gVisor's
// own and out of reach: lisafs's PRead handler overflows its size check
// for a count within 8 of 2^32 and panics before calling the server;
// lisafs recovers it and answers EREMOTEIO.
//
// Usage, in the binary that embeds runsc, before maincli.Main:
//
//	volume.Register()
package volume
