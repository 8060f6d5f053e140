package volume

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"

	"z.gfire.dev/gvx/ext4lite"
)

// Named tests for what a hostile Sentry found in the volume server (by
// FuzzServe or by reading): each plays the requests over a real lisafs
// connection and checks the volume with ext4lite's checker and e2fsck -fn.

// checkVolume runs ext4lite's own checker on the volume file; trace says
// what was sent.
func checkVolume(t testing.TB, path, trace string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ext4lite.Check(f, nil)
	if err != nil {
		t.Fatalf("check %s: %v; sent:\n%s", path, err, trace)
	}
	if !r.Clean() {
		t.Fatalf("check %s: %v; sent:\n%s", path, r.Err(), trace)
	}
}

// volumeClosed tells whether the server has closed s's volume.
func volumeClosed(s *served) bool {
	s.conn.vol.mu.Lock()
	defer s.conn.vol.mu.Unlock()
	return s.conn.vol.closed
}

// rawPRead sends PRead with the count the program chose (ClientFD.Read
// would split it and allocate the whole buffer on the client's side).
func rawPRead(c *lisafs.Client, fd lisafs.FDID, off uint64, count uint32) (uint64, error) {
	req := lisafs.PReadReq{Offset: off, FD: fd, Count: count}
	resp := lisafs.PReadResp{Buf: make([]byte, min(count, lisafs.MaxMessageSize()))}
	err := c.SndRcvMessage(lisafs.PRead, uint32(req.SizeBytes()), req.MarshalUnsafe, resp.CheckedUnmarshal, nil, req.String, resp.String)
	return uint64(resp.NumBytes), err
}

// rawMount sends Mount again, as only the connection's first message
// should be.
func rawMount(c *lisafs.Client) (lisafs.FDID, error) {
	var req lisafs.MountReq
	var resp lisafs.MountResp
	hostFD := [1]int{-1}
	err := c.SndRcvMessage(lisafs.Mount, uint32(req.SizeBytes()), req.MarshalBytes, resp.CheckedUnmarshal, hostFD[:], req.String, resp.String)
	if hostFD[0] >= 0 {
		unix.Close(hostFD[0])
		return lisafs.InvalidFDID, fmt.Errorf("mount donated host FD %d", hostFD[0])
	}
	if err != nil {
		return lisafs.InvalidFDID, err
	}
	return resp.Root.ControlFD, nil
}

// TestHostileSymlinkTargetNUL: a symlink whose target holds a NUL (no
// path from a guest's syscall does, a Sentry's request can) is refused
// with EINVAL. Before: ext4lite wrote it, and the volume was corrupt (the
// kernel, e2fsck and ext4lite's checker read a fast symlink's target up to
// its first NUL, which then disagrees with i_size).
func TestHostileSymlinkTargetNUL(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	for i, target := range []string{"x\x00y", "\x00", "abc\x00"} {
		if _, err := s.root.SymlinkAt(ctx, fmt.Sprintf("l%d", i), target, 0, 0); err != unix.EINVAL {
			t.Errorf("symlink -> %q: %v, want EINVAL", target, err)
		}
	}
	s.close()
	checkVolume(t, s.path, "symlink l -> x\\0y")
	e2fsckClean(t, s.path)
}

// TestHostileACLXattrChecks: system.posix_acl_access and _default, which
// the kernel stores as an entry with an empty name (e_name_len 0), leave a
// volume that ext4lite's checker passes, as e2fsck does. Before: the
// checker called every such entry corrupt (a false alarm on any volume
// with an ACL, the kernel's included).
func TestHostileACLXattrChecks(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	acl := "\x02\x00\x00\x00" // posix_acl_xattr_header, version 2, no entries
	for _, name := range []string{"system.posix_acl_access", "system.posix_acl_default"} {
		if err := s.root.SetXattr(ctx, name, acl, 0); err != nil {
			t.Fatalf("setxattr %s: %v", name, err)
		}
	}
	if v, err := s.root.GetXattr(ctx, "system.posix_acl_access", 64); err != nil || v != acl {
		t.Fatalf("getxattr: %q, %v", v, err)
	}
	s.close()
	e2fsckClean(t, s.path)
	checkVolume(t, s.path, "setxattr system.posix_acl_access and _default on /")
}

// TestHostileXattrEmptyName: "user.", "trusted." and "security." with
// nothing after the prefix are refused with EINVAL, as the VFS does. Before:
// ext4lite stored an entry with an empty name in a prefix namespace, which
// no kernel writes and its checker calls corrupt.
func TestHostileXattrEmptyName(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	for _, name := range []string{"user.", "trusted.", "security.", "system."} {
		if err := s.root.SetXattr(ctx, name, "v", 0); err != unix.EINVAL {
			t.Errorf("setxattr %q: %v, want EINVAL", name, err)
		}
	}
	s.close()
	checkVolume(t, s.path, `setxattr "user." and others on /`)
	e2fsckClean(t, s.path)
}

// TestHostileMountTwice: Mount is the connection's first message, once; a
// second is refused (EBUSY), so a Sentry cannot mint root FDs, which
// MaxOpen does not count, by the million, nor close one to tear the volume
// down under the others. Before: every Mount made one more root FD.
func TestHostileMountTwice(t *testing.T) {
	s := serve(t, 8<<20)
	for i := 0; i < 3; i++ {
		if id, err := rawMount(s.client); err != unix.EBUSY {
			t.Fatalf("mount %d: FD %d, %v; want EBUSY", i+2, id, err)
		}
	}
	ctx := context.Background()
	if _, err := s.root.MkdirAt(ctx, "d", 0o755, 0, 0); err != nil {
		t.Fatalf("the first mount's root after the refusals: %v", err)
	}
	s.close()
	checkVolume(t, s.path, "mount ×3")
}

// TestHostileMaxOpenOpenCreate: OpenCreateAt makes two FDs (the new file's
// control FD and its open FD), and is refused with ENFILE unless both fit
// under MaxOpen. Before: it checked for one, so the server held MaxOpen+1.
func TestHostileMaxOpenOpenCreate(t *testing.T) {
	s := serveMount(t, 8<<20, Mount{Target: "/vol", MaxOpen: 3})
	ctx := context.Background()
	if _, _, _, err := s.root.OpenCreateAt(ctx, "a", unix.O_RDWR, 0o644, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.root.OpenCreateAt(ctx, "b", unix.O_RDWR, 0o644, 0, 0); err != unix.ENFILE {
		t.Errorf("a second create with 2 of 3 FDs held: %v, want ENFILE", err)
	}
	if n := s.conn.open.Load(); n > 3 {
		t.Errorf("the server holds %d FDs, max-open 3", n)
	}
	if _, err := s.root.Walk(ctx, "a"); err != nil {
		t.Errorf("a walk to the third FD: %v", err)
	}
	s.close()
	checkVolume(t, s.path, "opencreate a, b with max-open 3")
}

// TestHostileGetdentsConcurrent: Getdents64 on one directory FD from
// several channels at once (lisafs serves them in parallel: both only read the
// node) each return the whole directory, in order, once. Before: both
// moved the FD's snapshot and cursor unlocked, a data race a Sentry could
// use to read past a slice (duplicates, gaps or a panic showed it).
func TestHostileGetdentsConcurrent(t *testing.T) {
	s := serve(t, 16<<20)
	ctx := context.Background()
	d := s.dir(t, "d")
	const n = 200
	for i := 0; i < n; i++ {
		if _, err := d.MknodAt(ctx, fmt.Sprintf("f%03d", i), unix.S_IFREG|0o644, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	id, _, err := d.OpenAt(ctx, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	dfd := s.client.NewFD(id)
	const readers = 4
	bad := make(chan string, readers)
	for round := 0; round < 2000 && len(bad) == 0; round++ {
		done := make(chan struct{})
		for g := 0; g < readers; g++ {
			go func() {
				defer func() { done <- struct{}{} }()
				ds, err := dfd.Getdents64(ctx, -(1 << 20)) // seek to 0, room for all
				if err != nil {
					bad <- fmt.Sprintf("round %d: %v", round, err)
					return
				}
				for i, e := range ds {
					if want := fmt.Sprintf("f%03d", i); string(e.Name) != want {
						bad <- fmt.Sprintf("round %d: entry %d is %q, want %q (%d entries)", round, i, e.Name, want, len(ds))
						return
					}
				}
				if len(ds) != n {
					bad <- fmt.Sprintf("round %d: %d entries, want %d", round, len(ds), n)
				}
			}()
		}
		for g := 0; g < readers; g++ {
			<-done
		}
	}
	close(bad)
	for b := range bad {
		t.Error(b)
	}
	dfd.Close(ctx, true)
	d.Close(ctx, true)
}

// TestHostileRootClosedFirst: a Sentry that releases the mount's root FD
// while it still holds others (a file and a directory it unlinked, each
// open) does not get the volume closed under them: the volume closes when
// the connection's last FD goes, so the unlinked inodes are freed first
// and the volume is left clean. Before: releasing the root closed the
// volume at once; the FDs still held answered ENOENT (the open, unlinked
// file could not be read) and their releases were dropped.
func TestHostileRootClosedFirst(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	d := s.dir(t, "d")
	f, fo := s.create(t, "f", pattern(100000, 1))
	if err := s.root.UnlinkAt(ctx, "d", unix.AT_REMOVEDIR); err != nil {
		t.Fatal(err)
	}
	if err := s.root.UnlinkAt(ctx, "f", 0); err != nil {
		t.Fatal(err)
	}
	s.root.Close(ctx, true)
	// The unlinked file is still readable: the volume is not closed.
	buf := make([]byte, 10)
	if n, err := fo.Read(ctx, buf, 0); err != nil || n != 10 {
		t.Errorf("read of the unlinked file after the root's release: %d, %v", n, err)
	}
	fo.Close(ctx, true)
	f.Close(ctx, true)
	d.Close(ctx, true)
	s.client.Close()
	s.srv.Wait()
	s.srv.Destroy()
	s.client = nil
	if !volumeClosed(s) {
		t.Fatal("the volume is still open after the connection's end")
	}
	checkVolume(t, s.path, "mkdir d, create f, rmdir d and unlink f while open, release the root, then the rest")
	e2fsckClean(t, s.path)
}

// TestHostilePReadHuge: PReads of 2^31 and 2^32-1 bytes are refused
// without a buffer of that size (lisafs bounds the response by
// MaxMessageSize; at 2^32-1 its own size check wraps and its handler
// panics, which it recovers as EREMOTEIO: knownLisafsPanic), and the
// server serves on; a read of what fits returns the data.
func TestHostilePReadHuge(t *testing.T) {
	s := serve(t, 8<<20)
	_, fd := s.create(t, "f", []byte("data"))
	for _, count := range []uint32{1 << 31, 1<<32 - 1, 1<<32 - 8} {
		before := heapAllocs()
		if _, err := rawPRead(s.client, fd.ID(), 0, count); err == nil {
			t.Errorf("pread of %d bytes: no error", count)
		}
		if a := heapAllocs() - before; a > 4<<20 { // the client's own response buffer (2 MiB) included
			t.Errorf("pread of %d bytes allocated %d bytes", count, a)
		}
	}
	if n, err := rawPRead(s.client, fd.ID(), 0, 4096); err != nil || n != 4 {
		t.Errorf("pread of 4096 bytes after: %d, %v", n, err)
	}
}

// TestHostileReadOnlyUnchanged: a read-only mount changes not one byte of
// the volume file, whatever a Sentry sends: every FuzzServe seed and 100
// random programs, on a volume holding a directory, files, a symlink and
// xattrs (the file is opened O_RDONLY, as the gofer opens it; lisafs and
// ext4lite refuse each write, and nothing else may write either).
func TestHostileReadOnlyUnchanged(t *testing.T) {
	s := serve(t, 8<<20)
	ctx := context.Background()
	d := s.dir(t, "a")
	for _, name := range []string{"b", "f0", "f1"} {
		untarFile(t, s, d, name, pattern(5000, 3))
	}
	if _, err := s.root.SymlinkAt(ctx, "c", "a/b", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.SetXattr(ctx, "user.a", "v", 0); err != nil {
		t.Fatal(err)
	}
	d.Close(ctx, true)
	s.close()
	path := s.path
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	progs := [][]byte{}
	for _, p := range hostileSeeds {
		progs = append(progs, p)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 100; i++ {
		p := make([]byte, 100+r.Intn(400))
		r.Read(p)
		progs = append(progs, p)
	}
	for i, p := range progs {
		ro := serveFile(t, path, Mount{Target: "/vol", ReadOnly: true, MaxOpen: hostileMaxOpen})
		h := &hostile{tb: t, s: ro, ctx: ctx, prog: p, fds: []lisafs.FDID{ro.root.ID()}}
		h.run()
		ro.close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("program %d changed the read-only volume; it sent:\n%s", i, strings.Join(h.trace, "\n"))
		}
	}
}

// TestHostileGetdentsHugeCount: a Getdents64 whose count is 2^31-1 on a
// directory whose entries take more than a message (12000 names of 200
// bytes: 2.7 MB as lisafs marshals them, 227 bytes each, the message
// 2 MiB) answers what fits in one message, and reads to the end return
// every name once. Before: the server recorded every entry, lisafs's
// handler sliced its message buffer past its end and panicked (recovered
// as EREMOTEIO), and the entries were consumed: lost to the next call.
func TestHostileGetdentsHugeCount(t *testing.T) {
	s := serve(t, 256<<20)
	ctx := context.Background()
	d := s.dir(t, "d")
	const n = 12000
	long := strings.Repeat("n", 195)
	for i := 0; i < n; i++ {
		if _, err := d.MknodAt(ctx, fmt.Sprintf("%s%05d", long, i), unix.S_IFREG|0o644, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	id, _, err := d.OpenAt(ctx, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	dfd := s.client.NewFD(id)
	seen := map[string]bool{}
	for calls := 0; ; calls++ {
		ds, err := dfd.Getdents64(ctx, math.MaxInt32)
		if err != nil {
			t.Fatalf("getdents %d: %v (after %d names)", calls, err, len(seen))
		}
		if len(ds) == 0 {
			break
		}
		for _, e := range ds {
			if seen[string(e.Name)] {
				t.Fatalf("%q twice", e.Name)
			}
			seen[string(e.Name)] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d names, want %d", len(seen), n)
	}
}

// TestHostileDirentsBounded: the directory snapshots a mount's open FDs
// hold are bounded by MaxDirents: a Sentry that reads one entry from each
// of many FDs on a large directory gets ENOMEM once they hold the budget,
// not a copy of the directory per FD; a snapshot read to its end is
// released while its FD stays open, and closing FDs releases theirs.
// Before: each open directory kept its whole listing until closed, so
// MaxOpen FDs could hold MaxOpen copies.
func TestHostileDirentsBounded(t *testing.T) {
	s := serve(t, 64<<20)
	s.conn.MaxDirents = 1 << 20
	ctx := context.Background()
	d := s.dir(t, "d")
	const n = 2000 // about 106 KB of snapshot each
	for i := 0; i < n; i++ {
		if _, err := d.MknodAt(ctx, fmt.Sprintf("f%04d", i), unix.S_IFREG|0o644, 0, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	var fds []lisafs.ClientFD
	enomem := 0
	for i := 0; i < 30; i++ {
		id, _, err := d.OpenAt(ctx, unix.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		fd := s.client.NewFD(id)
		fds = append(fds, fd)
		switch _, err := fd.Getdents64(ctx, 32); err {
		case nil:
		case unix.ENOMEM:
			enomem++
		default:
			t.Fatalf("getdents on FD %d: %v", i, err)
		}
		if held := s.conn.dirents.Load(); held > s.conn.MaxDirents {
			t.Fatalf("after %d FDs the snapshots hold %d bytes, MaxDirents %d", i+1, held, s.conn.MaxDirents)
		}
	}
	if enomem == 0 {
		t.Fatalf("30 snapshots of %d entries held under a 1 MiB bound", n)
	}
	for _, fd := range fds {
		fd.Close(ctx, true)
	}
	if held := s.conn.dirents.Load(); held != 0 {
		t.Fatalf("after every FD closed the snapshots hold %d bytes", held)
	}
	id, _, err := d.OpenAt(ctx, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	fd := s.client.NewFD(id)
	names := 0
	for {
		ds, err := fd.Getdents64(ctx, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		names += len(ds)
	}
	if names != n {
		t.Fatalf("read to the end: %d names, want %d", names, n)
	}
	if held := s.conn.dirents.Load(); held != 0 {
		t.Errorf("a snapshot read to its end still holds %d bytes", held)
	}
	if ds, err := fd.Getdents64(ctx, -(1 << 16)); err != nil || len(ds) == 0 {
		t.Errorf("a rewind after the end: %d entries, %v", len(ds), err)
	}
	fd.Close(ctx, true)
}

// TestHostileConcurrentPrograms: four hostile programs at once on one
// connection (lisafs serves its channels in parallel, so requests on the
// same FDs and inodes interleave), 20 rounds of random programs: no
// handler panic, no hang, the FD bound held, and after the unmount a
// closed volume that ext4lite's checker passes.
func TestHostileConcurrentPrograms(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for round := 0; round < 20; round++ {
		s := serveMount(t, hostileSize, Mount{Target: "/vol", MaxOpen: hostileMaxOpen})
		var wg sync.WaitGroup
		hs := make([]*hostile, 4)
		for g := range hs {
			p := make([]byte, 300+r.Intn(400))
			r.Read(p)
			hs[g] = &hostile{tb: t, s: s, ctx: context.Background(), prog: p, fds: []lisafs.FDID{s.root.ID()}, concurrent: true}
			wg.Add(1)
			go func() {
				defer wg.Done()
				hs[g].run()
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		s.close()
		var traces []string
		for g, h := range hs {
			traces = append(traces, fmt.Sprintf("program %d:\n%s", g, strings.Join(h.trace, "\n")))
		}
		if !volumeClosed(s) {
			t.Fatalf("round %d: the unmount left the volume open", round)
		}
		checkVolume(t, s.path, strings.Join(traces, "\n"))
	}
}
