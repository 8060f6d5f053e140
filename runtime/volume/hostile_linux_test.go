package volume

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"
	"gvisor.dev/gvisor/pkg/log"
)

// A hostile Sentry: a guest that took over the Sentry can send the volume
// server any lisafs message, with any arguments, in any order, on any FD
// number. hostile plays it from a byte program (FuzzServe's input, or a
// named test's), over a real lisafs connection to Serve.
//
// Invariants it checks after every operation (fail, never panic):
//   - no handler panicked (lisafs recovers a panic and logs it: panicLog
//     sees it), but for the one known in lisafs itself (knownLisafsPanic);
//   - no host FD was donated;
//   - the operation returns within opTimeout (no hang);
//   - it allocated at most opAllocBound bytes of Go heap, in the whole test
//     process (a PRead of 2^31 must not allocate 2 GiB);
//   - the server holds at most MaxOpen control and open FDs
//     (hostileMaxOpen; the mount's root FD is not counted), and directory
//     snapshots within MaxDirents.
// And after the program: the Sentry's unmount returns, closes the volume
// and releases every snapshot, and
// ext4lite's Check finds it clean (e2fsck -fn too, outside fuzzing).

const (
	hostileSize    = 8 << 20 // bytes: a small volume, so ENOSPC is reachable
	hostileMaxOpen = 12
	opTimeout      = 20 * time.Second
	opAllocBound   = 32 << 20
	hostileMaxOps  = 64
)

// hostile is one program's run: the FDs the server handed out, and those
// closed since, which the program names by index.
type hostile struct {
	tb     testing.TB
	s      *served
	ctx    context.Context
	prog   []byte
	fds    []lisafs.FDID // every FD the server returned, root first
	closed []lisafs.FDID
	trace  []string
	// donated names a host FD the server handed out (it never may: the
	// volume has none to give, see the package doc).
	donated string
	// concurrent: other programs run on the same connection at once, so
	// the heap bound is not checked (their allocations would count) and a
	// failure ends this program's goroutine (Errorf, Goexit).
	concurrent bool
}

// fatalf fails the test from the goroutine running h.
func (h *hostile) fatalf(format string, args ...any) {
	h.tb.Helper()
	if h.concurrent {
		h.tb.Errorf(format, args...)
		runtime.Goexit()
	}
	h.tb.Fatalf(format, args...)
}

// knownLisafsPanic tells whether a recovered handler panic (its message
// and stack) is the one in lisafs itself: PReadHandler adds the request's
// Count to its response header's size in uint32, so a Count within 8 of
// 2^32 wraps past its size check and slicing the payload buffer panics.
// It is gVisor's code, before ours is called (no frame of this package is
// on the stack); lisafs recovers it and answers EREMOTEIO, and the server
// serves on (the harness checks it does).
func knownLisafsPanic(msg string) bool {
	return strings.Contains(msg, "lisafs.PReadHandler") && strings.Contains(msg, "slice bounds out of range") &&
		!strings.Contains(msg, "gvx/runtime/volume.")
}

// panicLog collects the handler panics lisafs recovers, but the known one
// of its own: lisafs logs them ("panic in handler") and answers EREMOTEIO,
// so without this a panic in the server's code would go unseen.
type panicLog struct {
	next log.Emitter
	mu   sync.Mutex
	msgs []string
}

func (p *panicLog) Emit(depth int, level log.Level, ts time.Time, format string, v ...any) {
	if strings.HasPrefix(format, "panic in handler") {
		if msg := fmt.Sprintf(format, v...); !knownLisafsPanic(msg) {
			p.mu.Lock()
			p.msgs = append(p.msgs, msg)
			p.mu.Unlock()
		}
		return
	}
	p.next.Emit(depth+1, level, ts, format, v...)
}

func (p *panicLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

var handlerPanics = sync.OnceValue(func() *panicLog {
	p := &panicLog{next: log.Log().Emitter}
	log.SetTarget(p)
	return p
})

// Hostile argument tables: the program picks by index, so a few bytes reach
// every edge.
var (
	hostileNames = []string{
		"a", "b", "c", "d", "", ".", "..", "a/b", "/", "x\x00y", "\x00",
		strings.Repeat("n", 255), strings.Repeat("n", 256), strings.Repeat("n", 4096),
	}
	hostileOffsets = []uint64{
		0, 1, 4095, 4096, 1 << 20, 1 << 31, 1 << 32, 1 << 44, 1<<44 + 1,
		1<<63 - 1, 1 << 63, math.MaxUint64, math.MaxUint64 - 4095,
	}
	hostileCounts = []uint32{0, 1, 4096, 1 << 16, 1<<21 - 4096, 1 << 21, 1 << 31, math.MaxUint32}
	hostileLens   = []int{0, 1, 100, 4096, 4097, 70000, 1 << 16}
	hostileModes  = []uint32{
		unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK, unix.S_IFCHR, unix.S_IFBLK,
		unix.S_IFIFO, unix.S_IFSOCK, 0, 0o170000, 0o7777,
	}
	hostileXattrs = []string{
		"user.a", "user.b", "trusted.overlay.opaque", "security.capability",
		"system.posix_acl_access", "user.", "", "nonamespace", "user.x\x00y",
		"user." + strings.Repeat("n", 250), "user." + strings.Repeat("n", 256),
	}
	hostileTargets = []string{"a", "../../../../etc/passwd", "/", "", "x\x00y", strings.Repeat("t", 59), strings.Repeat("t", 60), strings.Repeat("t", 4095), strings.Repeat("t", 4096)}
)

// Op codes of a hostile program: one byte each, then its arguments.
const (
	opWalk = iota
	opWalkStat
	opOpenAt
	opOpenCreateAt
	opMkdirAt
	opMknodAt
	opSymlinkAt
	opLinkAt
	opUnlinkAt
	opRenameAt
	opSetStat
	opFStat
	opFStatFS
	opPRead
	opPWrite
	opGetdents64
	opAllocate
	opFSync
	opFlush
	opClose
	opReadLinkAt
	opGetXattr
	opSetXattr
	opListXattr
	opRemoveXattr
	opBindAt
	opConnect
	opMount
	opCount
)

// next is the program's next byte (0 once it is used up).
func (h *hostile) next() byte {
	if len(h.prog) == 0 {
		return 0
	}
	b := h.prog[0]
	h.prog = h.prog[1:]
	return b
}

func (h *hostile) u32() uint32 {
	var b [4]byte
	for i := range b {
		b[i] = h.next()
	}
	return binary.LittleEndian.Uint32(b[:])
}

func pick[T any](h *hostile, list []T) T { return list[int(h.next())%len(list)] }

// fd picks an FD: mostly one the server gave out (any kind: a control FD
// where an open FD is wanted and back), else one already closed, one never
// given, or a raw number.
func (h *hostile) fd() lisafs.FDID {
	b := h.next()
	switch {
	case b < 0xe0 && len(h.fds) > 0:
		return h.fds[int(b)%len(h.fds)]
	case b < 0xf0 && len(h.closed) > 0:
		return h.closed[int(b)%len(h.closed)]
	case b < 0xf8:
		return lisafs.FDID(h.u32())
	default:
		return lisafs.FDID(len(h.fds) + len(h.closed) + 1 + int(b&7)) // the next few the server will hand out
	}
}

func (h *hostile) name() string {
	b := h.next()
	if b >= 0xf0 {
		return fmt.Sprintf("f%d", b&15)
	}
	return hostileNames[int(b)%len(hostileNames)]
}

func (h *hostile) got(ids ...lisafs.FDID) {
	for _, id := range ids {
		if id.Ok() {
			h.fds = append(h.fds, id)
		}
	}
}

// run plays the program, at most hostileMaxOps operations, checking the
// per-operation invariants.
func (h *hostile) run() {
	for n := 0; n < hostileMaxOps && len(h.prog) > 0; n++ {
		op := h.next() % opCount
		var desc string
		before, t0, panics := heapAllocs(), time.Now(), handlerPanics().count()
		done := make(chan struct{})
		go func() {
			defer close(done)
			desc = h.step(op)
		}()
		select {
		case <-done:
		case <-time.After(opTimeout):
			h.fatalf("op %d (code %d) did not return in %v; before it:\n%s", n, op, opTimeout, strings.Join(h.trace, "\n"))
		}
		h.trace = append(h.trace, desc+" ["+time.Since(t0).String()+"]")
		if a := heapAllocs() - before; a > opAllocBound && !h.concurrent {
			h.fatalf("%s allocated %d bytes (bound %d); program:\n%s", desc, a, opAllocBound, strings.Join(h.trace, "\n"))
		}
		if n := handlerPanics().count(); n > panics {
			p := handlerPanics()
			p.mu.Lock()
			msg := p.msgs[len(p.msgs)-1]
			p.mu.Unlock()
			h.fatalf("%s panicked in the server (lisafs recovered it): %s\nprogram:\n%s", desc, msg, strings.Join(h.trace, "\n"))
		}
		if h.donated != "" {
			h.fatalf("the server donated a host FD: %s; program:\n%s", h.donated, strings.Join(h.trace, "\n"))
		}
		if b := h.s.conn.dirents.Load(); b > DefaultMaxDirents || b < 0 {
			h.fatalf("after %s the directory snapshots hold %d bytes (max %d); program:\n%s", desc, b, DefaultMaxDirents, strings.Join(h.trace, "\n"))
		}
		if o := h.s.conn.open.Load(); o > hostileMaxOpen || o < 0 {
			h.fatalf("after %s the server holds %d FDs (max-open %d); program:\n%s", desc, o, hostileMaxOpen, strings.Join(h.trace, "\n"))
		}
	}
}

// heapAllocs is the Go heap allocated so far, in bytes, by the whole
// process.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// step sends one operation and describes it and its result.
func (h *hostile) step(op byte) string {
	ctx, c := h.ctx, h.s.client
	fd := c.NewFD(h.fd())
	res := func(format string, args ...any) string {
		return fmt.Sprintf("fd %d: ", fd.ID()) + fmt.Sprintf(format, args...)
	}
	switch op {
	case opWalk:
		names := make([]string, 1+h.next()%3)
		for i := range names {
			names[i] = h.name()
		}
		_, inodes, err := fd.WalkMultiple(ctx, names)
		for _, in := range inodes {
			h.got(in.ControlFD)
		}
		return res("walk %q: %d inodes, %v", names, len(inodes), err)
	case opWalkStat:
		names := make([]string, h.next()%4)
		for i := range names {
			names[i] = h.name()
		}
		st, err := fd.WalkStat(ctx, names)
		return res("walkstat %q: %d, %v", names, len(st), err)
	case opOpenAt:
		flags := pick(h, []uint32{unix.O_RDONLY, unix.O_WRONLY, unix.O_RDWR, unix.O_RDWR | unix.O_TRUNC, unix.O_WRONLY | unix.O_TRUNC, unix.O_DIRECTORY, math.MaxUint32})
		id, hostFD, err := fd.OpenAt(ctx, flags)
		h.got(id)
		h.hostFD("open", hostFD, err)
		return res("open %#x: %d, %v", flags, id, err)
	case opOpenCreateAt:
		name, flags := h.name(), pick(h, []uint32{unix.O_RDWR, unix.O_WRONLY, unix.O_RDONLY, unix.O_RDWR | unix.O_TRUNC})
		in, ofd, hostFD, err := fd.OpenCreateAt(ctx, name, flags, linux.FileMode(h.u32()), lisafs.UID(h.next()), lisafs.GID(h.next()))
		h.got(in.ControlFD, ofd)
		h.hostFD("opencreate", hostFD, err)
		return res("opencreate %q %#x: %v", name, flags, err)
	case opMkdirAt:
		name := h.name()
		in, err := fd.MkdirAt(ctx, name, linux.FileMode(h.u32()), lisafs.UID(h.next()), 0)
		h.got(in.ControlFD)
		return res("mkdir %q: %v", name, err)
	case opMknodAt:
		name, mode := h.name(), pick(h, hostileModes)|uint32(h.next())<<1
		in, err := fd.MknodAt(ctx, name, linux.FileMode(mode), 0, 0, h.u32(), h.u32())
		h.got(in.ControlFD)
		return res("mknod %q %#o: %v", name, mode, err)
	case opSymlinkAt:
		name, target := h.name(), pick(h, hostileTargets)
		in, err := fd.SymlinkAt(ctx, name, target, 0, 0)
		h.got(in.ControlFD)
		return res("symlink %q -> %.20q (%d bytes): %v", name, target, len(target), err)
	case opLinkAt:
		target, name := h.fd(), h.name()
		in, err := fd.LinkAt(ctx, target, name)
		h.got(in.ControlFD)
		return res("link fd %d as %q: %v", target, name, err)
	case opUnlinkAt:
		name, flags := h.name(), pick(h, []uint32{0, unix.AT_REMOVEDIR, math.MaxUint32})
		return res("unlink %q %#x: %v", name, flags, fd.UnlinkAt(ctx, name, flags))
	case opRenameAt:
		oname, ndir, nname := h.name(), h.fd(), h.name()
		flags := pick(h, []uint32{0, 0, unix.RENAME_NOREPLACE, unix.RENAME_EXCHANGE, unix.RENAME_NOREPLACE | unix.RENAME_EXCHANGE, unix.RENAME_WHITEOUT, math.MaxUint32})
		return res("rename %q to fd %d %q %#x: %v", oname, ndir, nname, flags, fd.RenameAt(ctx, oname, ndir, nname, flags))
	case opSetStat:
		st := linux.Statx{
			Mask: h.u32(), Mode: uint16(h.u32()), UID: uint32(h.next()), GID: uint32(h.next()),
			Size:  pick(h, hostileOffsets),
			Atime: linux.StatxTimestamp{Sec: int64(pick(h, hostileOffsets)), Nsec: pick(h, []uint32{0, linux.UTIME_NOW, linux.UTIME_OMIT, 999999999, 1e9, math.MaxUint32})},
			Mtime: linux.StatxTimestamp{Sec: -int64(pick(h, hostileOffsets)), Nsec: pick(h, []uint32{0, linux.UTIME_NOW, linux.UTIME_OMIT, 1e9})},
		}
		fail, ferr, err := fd.SetStat(ctx, &st)
		return res("setstat mask %#x size %d: %#x %v %v", st.Mask, st.Size, fail, ferr, err)
	case opFStat:
		var st lisafs.Statx
		return res("fstat: %v", fd.StatTo(ctx, &st))
	case opFStatFS:
		var st lisafs.StatFS
		return res("statfs: %v", fd.StatFSTo(ctx, &st))
	case opPRead:
		off, count := pick(h, hostileOffsets), pick(h, hostileCounts)
		n, err := rawPRead(c, fd.ID(), off, count)
		return res("pread %d at %d: %d, %v", count, off, n, err)
	case opPWrite:
		off, n := pick(h, hostileOffsets), pick(h, hostileLens)
		w, err := fd.Write(ctx, pattern(n, h.next()), off)
		return res("pwrite %d at %d: %d, %v", n, off, w, err)
	case opGetdents64:
		count := int32(h.u32())
		if b := h.next(); b&1 == 0 {
			count = pick(h, []int32{0, 1, -1, 4096, -4096, math.MaxInt32, math.MinInt32})
		}
		ds, err := fd.Getdents64(ctx, count)
		return res("getdents %d: %d, %v", count, len(ds), err)
	case opAllocate:
		mode, off, length := uint64(pick(h, []uint32{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_ZERO_RANGE, math.MaxUint32})), pick(h, hostileOffsets), pick(h, hostileOffsets)
		return res("fallocate %#x %d+%d: %v", mode, off, length, fd.Allocate(ctx, mode, off, length))
	case opFSync:
		ids := []lisafs.FDID{fd.ID(), h.fd(), h.fd()}
		return res("fsync %v: %v", ids, c.SyncFDs(ctx, ids))
	case opFlush:
		return res("flush: %v", fd.Flush(ctx))
	case opClose:
		c.CloseFD(ctx, fd.ID(), true)
		h.closed = append(h.closed, fd.ID())
		return res("close")
	case opReadLinkAt:
		t, err := fd.ReadLinkAt(ctx)
		return res("readlink: %d bytes, %v", len(t), err)
	case opGetXattr:
		name, size := pick(h, hostileXattrs), uint64(pick(h, hostileCounts))
		v, err := fd.GetXattr(ctx, name, size)
		return res("getxattr %.20q %d: %d bytes, %v", name, size, len(v), err)
	case opSetXattr:
		name, n := pick(h, hostileXattrs), pick(h, []int{0, 1, 100, 3000, 4096, 65536, 65537, 1 << 17})
		flags := pick(h, []uint32{0, unix.XATTR_CREATE, unix.XATTR_REPLACE, math.MaxUint32})
		return res("setxattr %.20q %d bytes %#x: %v", name, n, flags, fd.SetXattr(ctx, name, string(pattern(n, 1)), flags))
	case opListXattr:
		size := uint64(pick(h, hostileCounts))
		names, err := fd.ListXattr(ctx, size)
		return res("listxattr %d: %d, %v", size, len(names), err)
	case opRemoveXattr:
		name := pick(h, hostileXattrs)
		return res("removexattr %.20q: %v", name, fd.RemoveXattr(ctx, name))
	case opBindAt:
		name := h.name()
		in, bfd, err := fd.BindAt(ctx, linux.SOCK_STREAM, name, 0o777, 0, 0)
		h.got(in.ControlFD)
		if bfd != nil {
			h.hostFD("bind", int(bfd.NotificationFD()), err)
			bfd.Close(ctx)
		}
		return res("bind %q: %v", name, err)
	case opConnect:
		sfd, err := fd.Connect(ctx, linux.SOCK_STREAM, lisafs.UID(h.next()), 0)
		h.hostFD("connect", sfd, err)
		return res("connect: %d, %v", sfd, err)
	case opMount:
		id, err := rawMount(c)
		h.got(id)
		return fmt.Sprintf("mount: %d, %v", id, err)
	}
	return "?"
}

// hostFD notes a host FD the server donated for op (and closes it); a
// failed op returns none.
func (h *hostile) hostFD(op string, fd int, err error) {
	if err == nil && fd >= 0 {
		h.donated = fmt.Sprintf("%s: host FD %d", op, fd)
		unix.Close(fd)
	}
}

// playHostile serves a fresh volume, plays prog against it, unmounts it as
// the Sentry does and checks what is left: ext4lite's Check always,
// e2fsck -fn when withE2fsck.
func playHostile(t *testing.T, prog []byte, withE2fsck bool) *hostile {
	t.Helper()
	s := serveMount(t, hostileSize, Mount{Target: "/vol", MaxOpen: hostileMaxOpen})
	h := &hostile{tb: t, s: s, ctx: context.Background(), prog: prog, fds: []lisafs.FDID{s.root.ID()}}
	h.run()
	// The unmount, as the Sentry sends it, is bounded too.
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		s.close()
	}()
	select {
	case <-done:
	case <-time.After(opTimeout):
		t.Fatalf("the unmount did not return in %v; program:\n%s", opTimeout, strings.Join(h.trace, "\n"))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the unmount took %v; program:\n%s", d, strings.Join(h.trace, "\n"))
	}
	if !volumeClosed(s) {
		t.Fatalf("the unmount left the volume open; program:\n%s", strings.Join(h.trace, "\n"))
	}
	if b := s.conn.dirents.Load(); b != 0 {
		t.Fatalf("after the unmount %d bytes of directory snapshots are still charged; program:\n%s", b, strings.Join(h.trace, "\n"))
	}
	checkVolume(t, s.path, strings.Join(h.trace, "\n"))
	if withE2fsck {
		e2fsckClean(t, s.path)
	}
	return h
}

// prog assembles a hostile program from op codes and argument bytes.
func prog(parts ...any) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b.WriteByte(byte(p))
		case uint32:
			binary.Write(&b, binary.LittleEndian, p)
		case string:
			b.WriteString(p)
		case []byte:
			b.Write(p)
		}
	}
	return b.Bytes()
}
