package volume

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"
	"gvisor.dev/gvisor/pkg/unet"

	"z.gfire.dev/gvx/ext4lite"
)

// served is a volume served over a real lisafs connection (a socket pair
// and flipcall channels, as between the Sentry and the gofer), with the
// client the Sentry uses.
type served struct {
	path   string
	client *lisafs.Client
	root   lisafs.ClientFD
	srv    *lisafs.Server
	conn   *Conn // the server's side, for its FD count
}

// serve creates a size-byte volume in a temporary directory and serves it
// with Serve, as the gofer extension does.
func serve(tb testing.TB, size int64) *served {
	tb.Helper()
	return serveMount(tb, size, Mount{Target: "/vol"})
}

// serveMount is serve with the mount described by v (Name is set to the
// volume file's path).
func serveMount(tb testing.TB, size int64, v Mount) *served {
	tb.Helper()
	return serveAt(tb, filepath.Join(tb.TempDir(), "vol.ext4"), size, v)
}

// serveAt is serveMount with the volume file at path.
func serveAt(tb testing.TB, path string, size int64, v Mount) *served {
	tb.Helper()
	fsys, err := ext4lite.Create(path, size, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		tb.Fatal(err)
	}
	return serveFile(tb, path, v)
}

// serveFile serves the existing volume file at path as v describes
// (read-only: the file is opened O_RDONLY, as the gofer opens it).
func serveFile(tb testing.TB, path string, v Mount) *served {
	tb.Helper()
	return serveFileStats(tb, path, v, nil)
}

// serveFileStats is serveFile keeping the counters in stats (ServeStats).
func serveFileStats(tb testing.TB, path string, v Mount, stats *os.File) *served {
	tb.Helper()
	flags := os.O_RDWR
	if v.ReadOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		tb.Fatal(err)
	}
	v.Name = path
	impl, opts, err := ServeStats(f, v, 0, stats, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ours, theirs, err := unet.SocketPair(false)
	if err != nil {
		tb.Fatal(err)
	}
	srv := lisafs.NewServer()
	conn, err := srv.CreateConnection(ours, "/vol", opts, impl)
	if err != nil {
		tb.Fatal(err)
	}
	srv.StartConnection(conn)
	client, root, _, err := lisafs.NewClient(theirs)
	if err != nil {
		tb.Fatal(err)
	}
	if err := client.StartChannels(); err != nil {
		tb.Fatal(err)
	}
	s := &served{path: path, client: client, root: client.NewFD(root.ControlFD), srv: srv, conn: impl.(*Conn)}
	tb.Cleanup(s.close)
	return s
}

// close unmounts as the Sentry does (the root FD last), and waits until
// the server has closed the volume.
func (s *served) close() {
	if s.client == nil {
		return
	}
	ctx := context.Background()
	s.root.Close(ctx, true)
	s.client.Close()
	s.srv.Wait()
	s.srv.Destroy()
	s.client = nil
}

// dir makes a directory under the root and returns its FD.
func (s *served) dir(tb testing.TB, name string) lisafs.ClientFD {
	tb.Helper()
	in, err := s.root.MkdirAt(context.Background(), name, 0o755, 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return s.client.NewFD(in.ControlFD)
}

// create makes name under the root, open read-write, writes data into it
// and returns its control and open FDs.
func (s *served) create(tb testing.TB, name string, data []byte) (cfd, fd lisafs.ClientFD) {
	tb.Helper()
	ctx := context.Background()
	in, ofd, _, err := s.root.OpenCreateAt(ctx, name, unix.O_RDWR, 0o644, 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	cfd, fd = s.client.NewFD(in.ControlFD), s.client.NewFD(ofd)
	if n, err := fd.Write(ctx, data, 0); err != nil || n != uint64(len(data)) {
		tb.Fatalf("write %s: %d, %v", name, n, err)
	}
	return cfd, fd
}

// untarFile sends what the Sentry sends for one small file busybox tar
// extracts (counted in a runsc debug log): unlink (ENOENT), walk (ENOENT),
// create and open, write, chmod, utimes; the FDs are closed (batched by the
// client).
func untarFile(tb testing.TB, s *served, dir lisafs.ClientFD, name string, data []byte) {
	ctx := context.Background()
	if err := dir.UnlinkAt(ctx, name, 0); err != unix.ENOENT {
		tb.Fatalf("unlink %s: %v, want ENOENT", name, err)
	}
	if _, err := dir.Walk(ctx, name); err != unix.ENOENT {
		tb.Fatalf("walk %s: %v, want ENOENT", name, err)
	}
	in, ofd, _, err := dir.OpenCreateAt(ctx, name, unix.O_WRONLY, 0o644, 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	cfd, fd := s.client.NewFD(in.ControlFD), s.client.NewFD(ofd)
	if n, err := fd.Write(ctx, data, 0); err != nil || n != uint64(len(data)) {
		tb.Fatalf("write %s: %d, %v", name, n, err)
	}
	if _, failure, err := cfd.SetStat(ctx, &linux.Statx{Mask: linux.STATX_MODE, Mode: 0o644}); err != nil || failure != nil {
		tb.Fatalf("chmod %s: %v %v", name, failure, err)
	}
	now := linux.StatxTimestamp{Sec: 1e9}
	if _, failure, err := cfd.SetStat(ctx, &linux.Statx{Mask: linux.STATX_ATIME | linux.STATX_MTIME, Atime: now, Mtime: now}); err != nil || failure != nil {
		tb.Fatalf("utimes %s: %v %v", name, failure, err)
	}
	fd.Close(ctx, true)
	cfd.Close(ctx, true)
}

// readAll reads a file of the volume back with ext4lite.
func readAll(t *testing.T, fsys *ext4lite.FS, name string) []byte {
	t.Helper()
	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

// pattern is n bytes that differ at every offset mod 251.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) + seed
	}
	return b
}

// TestServeWorkload: what the guest's untar and dd send (the RPCs the
// Sentry makes, over a real lisafs connection) leaves a volume that
// e2fsck -fn passes and that reads back byte for byte: small files, a
// 3 MiB+ file written in block-aligned MiB writes with a partial last
// block, and writes that start inside a block of a hole (the paths of
// writeData that copy into a zeroed buffer), read back through lisafs
// before the unmount and with ext4lite after it.
func TestServeWorkload(t *testing.T) {
	s := serve(t, 256<<20)
	ctx := context.Background()
	dirs := []lisafs.ClientFD{s.dir(t, "d0"), s.dir(t, "d1")}
	for i := 0; i < 300; i++ {
		untarFile(t, s, dirs[i%2], fmt.Sprintf("f%d", i), []byte(fmt.Sprintf("file %d\n", i)))
	}
	big := pattern(3<<20+1234, 7)
	in, ofd, _, err := s.root.OpenCreateAt(ctx, "big", unix.O_RDWR, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := s.client.NewFD(ofd)
	for off := 0; off < len(big); off += 1 << 20 {
		chunk := big[off:min(off+1<<20, len(big))]
		if n, err := fd.Write(ctx, chunk, uint64(off)); err != nil || n != uint64(len(chunk)) {
			t.Fatalf("write at %d: %d, %v", off, n, err)
		}
	}
	// Into holes, starting mid-block: 100 bytes at 5 MiB+10, 70000 at
	// 6 MiB+4000 (the file's size is then 6 MiB+74000).
	sparse := map[int][]byte{5<<20 + 10: pattern(100, 3), 6<<20 + 4000: pattern(70000, 5)}
	for off, b := range sparse {
		if _, err := fd.Write(ctx, b, uint64(off)); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]byte, 6<<20+74000)
	copy(want, big)
	for off, b := range sparse {
		copy(want[off:], b)
	}
	got := make([]byte, len(want)+4096)
	n, err := fd.Read(ctx, got, 0)
	if err != nil || n != uint64(len(want)) || !bytes.Equal(got[:n], want) {
		t.Fatalf("read back over lisafs: %d bytes (want %d), %v; equal %v", n, len(want), err, bytes.Equal(got[:min(n, uint64(len(want)))], want[:min(n, uint64(len(want)))]))
	}
	fd.Close(ctx, true)
	cfd := s.client.NewFD(in.ControlFD)
	cfd.Close(ctx, true)
	for _, d := range dirs {
		d.Close(ctx, true)
	}
	s.close()

	e2fsckClean(t, s.path)
	fsys, err := ext4lite.Open(s.path, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if b := readAll(t, fsys, "big"); !bytes.Equal(b, want) {
		t.Fatalf("big after the unmount: %d bytes, want %d (equal %v)", len(b), len(want), bytes.Equal(b, want))
	}
	for _, i := range []int{0, 1, 150, 299} {
		if b, w := readAll(t, fsys, fmt.Sprintf("d%d/f%d", i%2, i)), fmt.Sprintf("file %d\n", i); string(b) != w {
			t.Errorf("d%d/f%d: %q, want %q", i%2, i, b, w)
		}
	}
}

// TestFsyncAfterCleanSync: a volume that nothing changed since its last
// sync answers FSync at once, and a write after that makes the next FSync
// flush again: a copy of the volume file taken right after it (the state a
// crash would leave) holds the write once ext4lite replays the journal.
func TestFsyncAfterCleanSync(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	_, fd := s.create(t, "f", []byte("one"))
	for i := 0; i < 3; i++ { // the second and third find the volume clean
		if err := fd.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fd.Write(ctx, []byte("two, longer"), 3); err != nil {
		t.Fatal(err)
	}
	if err := fd.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(s.path) // as a crash leaves it: not unmounted
	if err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(t.TempDir(), "crash.ext4")
	if err := os.WriteFile(crash, img, 0o600); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4lite.Open(crash, nil) // replays the journal
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, fsys, "f"); string(b) != "onetwo, longer" {
		t.Fatalf("after the crash: %q, want %q", b, "onetwo, longer")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, crash)
}

// e2fsckClean runs e2fsck -fn on the volume file (skips without it).
func e2fsckClean(t testing.TB, path string) {
	t.Helper()
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck not installed (apt-get install e2fsprogs)")
	}
	if out, err := exec.Command("e2fsck", "-fn", path).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", path, err, out)
	}
}
