package volume

import (
	"flag"
	"testing"

	"golang.org/x/sys/unix"
)

// hostileSeeds are FuzzServe's seed corpus: each a meaningful hostile
// sequence (see hostile for the encoding: an op code, then its arguments;
// an FD byte below 0xe0 names the FDs handed out so far, root first).
var hostileSeeds = map[string][]byte{
	// mkdir a, a/b; rename a into a/b (its own descendant), and a cycle of
	// renames through RENAME_EXCHANGE.
	"rename-into-descendant": prog(
		opMkdirAt, 0, 0, uint32(0o755), 0,
		opMkdirAt, 1, 1, uint32(0o755), 0,
		opRenameAt, 0, 0, 2, 2, 0,
		opRenameAt, 0, 0, 2, 1, 3,
		opRenameAt, 1, 1, 0, 0, 0,
		opRenameAt, 0, 0, 1, 2, 0,
	),
	// create a; write at 0, 2^31, 2^63-1; read 2^31 and 2^32-1 bytes;
	// truncate to 2^44; fallocate at the end of the address space; link
	// the file, then its directory.
	"file-edges": prog(
		opOpenCreateAt, 0, 0, 0, uint32(0o644), 0, 0,
		opPWrite, 2, 0, 3, 7,
		opPWrite, 2, 5, 3, 7,
		opPWrite, 2, 9, 1, 7,
		opPRead, 2, 0, 6,
		opPRead, 2, 12, 7,
		opSetStat, 1, uint32(unix.STATX_SIZE), uint32(0), 0, 0, 7, 0, 0, 0, 0,
		opAllocate, 2, 0, 11, 2,
		opAllocate, 2, 0, 9, 1,
		opLinkAt, 0, 1, 1,
		opLinkAt, 0, 0, 2,
		opGetdents64, 2, 0, 0, 0, 0, 0, 5,
		opGetdents64, 0, 0, 0, 0, 0, 0, 6,
	),
	// mknod of every type, xattrs of 64 KiB and more, a list, a removal.
	"nodes-and-xattrs": prog(
		opMknodAt, 0, 0, 0, 0, uint32(1), uint32(3),
		opMknodAt, 0, 1, 1, 0, uint32(0), uint32(0),
		opMknodAt, 0, 2, 2, 0, uint32(0), uint32(0),
		opMknodAt, 0, 3, 3, 0, uint32(0), uint32(0),
		opMknodAt, 0, 0xf0, 4, 0, uint32(7), uint32(8),
		opMknodAt, 0, 0xf1, 5, 0, uint32(0), uint32(0),
		opMknodAt, 0, 0xf2, 6, 0, uint32(0), uint32(0),
		opMknodAt, 0, 0xf3, 8, 0, uint32(0), uint32(0),
		opSetXattr, 1, 0, 5, 0,
		opSetXattr, 1, 1, 6, 0,
		opSetXattr, 0, 2, 1, 1,
		opSetXattr, 0, 9, 3, 0,
		opListXattr, 0, 0,
		opRemoveXattr, 0, 2,
		opOpenAt, 2, 0,
	),
	// names and symlink targets with NUL, "/", "..", "", 255+ bytes.
	"bad-names": prog(
		opMkdirAt, 0, 9, uint32(0o755), 0,
		opMkdirAt, 0, 11, uint32(0o755), 0,
		opMkdirAt, 0, 12, uint32(0o755), 0,
		opSymlinkAt, 0, 0, 4,
		opSymlinkAt, 0, 1, 3,
		opSymlinkAt, 0, 2, 7,
		opSymlinkAt, 0, 3, 8,
		opWalk, 0, 2, 7, 6, 9,
		opWalkStat, 0, 3, 4, 0, 1,
		opReadLinkAt, 1, opReadLinkAt, 2,
		opUnlinkAt, 0, 6, 1,
	),
	// FDs never given, closed, and of the wrong kind; the root closed
	// under live FDs; Mount sent again.
	"bad-fds": prog(
		opOpenCreateAt, 0, 0, 0, uint32(0o644), 0, 0,
		opPRead, 1, 0, 2,
		opGetdents64, 1, 0, 0, 0, 0, 0, 4,
		opMkdirAt, 2, 1, uint32(0o755), 0,
		opClose, 2,
		opPWrite, 0xe0, 0, 1, 0,
		opFStat, 0xf0, uint32(1<<31),
		opMount, opMount,
		opClose, 3,
		opWalk, 4, 0, 0,
		opClose, 0,
		opFStat, 1,
		opSetStat, 1, uint32(unix.STATX_MODE), uint32(0o4755), 0, 0, 0, 0, 0, 0, 0,
		opOpenAt, 1, 2,
		opFSync, 1, 2, 3,
	),
	// open files until max-open, then more.
	"max-open": prog(
		opOpenCreateAt, 0, 0xf0, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf1, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf2, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf3, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf4, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf5, 0, uint32(0o644), 0, 0,
		opOpenCreateAt, 0, 0xf6, 0, uint32(0o644), 0, 0,
		opWalk, 0, 0, 0xf0,
		opOpenAt, 1, 2,
		opMkdirAt, 0, 0, uint32(0o755), 0,
	),
}

// fuzzing tells whether the test binary runs with -fuzz (the seeds alone
// then also run e2fsck -fn, which is too slow for every iteration).
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzServe drives the volume server as a Sentry the guest took over
// would: every request type the server implements, hostile arguments, any
// order, any FD (see hostile for the invariants checked). The seeds are
// hostileSeeds.
func FuzzServe(f *testing.F) {
	for _, p := range hostileSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		playHostile(t, p, !fuzzing())
	})
}
