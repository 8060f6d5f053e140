package volume

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/abi/linux"
	"gvisor.dev/gvisor/pkg/context"
	"gvisor.dev/gvisor/pkg/lisafs"

	"z.gfire.dev/gvx/ext4lite"
)

// TestOpenUnlinkedFile: a file unlinked while open lives on as on the
// kernel's ext4 until its last FD closes: the Sentry's ftruncate
// (SetStat of the size on its control FD), fallocate, a second open (as
// /proc/self/fd/N reopens it), write, read and fstat all work on it.
// pytest's output capture (tempfile.TemporaryFile: create, unlink, then
// truncate and rewrite) depends on it; lisafs answered EINVAL to the
// SetStat, Open and Allocate of a deleted node unless the connection says
// the server can take them. After the last close the inode is freed and
// e2fsck -fn passes.
func TestOpenUnlinkedFile(t *testing.T) {
	s := serve(t, 64<<20)
	ctx := context.Background()
	freeBefore := s.conn.vol.fs.StatFS().FreeInodes

	cfd, fd := s.create(t, "capture", bytes.Repeat([]byte("x"), 10000))
	if err := s.root.UnlinkAt(ctx, "capture", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.root.Walk(ctx, "capture"); err != unix.ENOENT {
		t.Fatalf("walk after unlink: %v, want ENOENT", err)
	}

	// ftruncate(fd, 0), as TemporaryFile.truncate() sends it.
	if _, failure, err := cfd.SetStat(ctx, &linux.Statx{Mask: linux.STATX_SIZE, Size: 0}); err != nil || failure != nil {
		t.Fatalf("ftruncate of the unlinked file: %v %v", failure, err)
	}
	if n, err := fd.Write(ctx, []byte("rewritten"), 0); err != nil || n != 9 {
		t.Fatalf("write after truncate: %d, %v", n, err)
	}
	if err := fd.Allocate(ctx, 0, 0, 8192); err != nil {
		t.Fatalf("fallocate of the unlinked file: %v", err)
	}
	var st lisafs.Statx
	if err := cfd.StatTo(ctx, &st); err != nil || st.Size != 8192 || st.Nlink != 0 {
		t.Fatalf("fstat: size %d nlink %d, %v; want 8192, 0", st.Size, st.Nlink, err)
	}
	if _, failure, err := cfd.SetStat(ctx, &linux.Statx{Mask: linux.STATX_SIZE, Size: 9}); err != nil || failure != nil {
		t.Fatalf("second ftruncate: %v %v", failure, err)
	}

	// A second open of the unlinked file (open("/proc/self/fd/N")).
	ofd2, _, err := cfd.OpenAt(ctx, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("reopen of the unlinked file: %v", err)
	}
	fd2 := s.client.NewFD(ofd2)
	buf := make([]byte, 100)
	if n, err := fd2.Read(ctx, buf, 0); err != nil || string(buf[:n]) != "rewritten" {
		t.Fatalf("read through the second open: %q, %v", buf[:n], err)
	}

	fd2.Close(ctx, true)
	fd.Close(ctx, true)
	cfd.Close(ctx, true)
	if got := s.conn.vol.fs.StatFS().FreeInodes; got != freeBefore {
		t.Errorf("free inodes after the last close: %d, want %d (the unlinked inode was not freed)", got, freeBefore)
	}
	s.close()
	e2fsckClean(t, s.path)
	fsys, err := ext4lite.Open(s.path, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if _, err := fsys.Lstat("capture"); err == nil {
		t.Error("capture is back after the unmount")
	}
}
