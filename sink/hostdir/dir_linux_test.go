package hostdir

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
		dir := t.TempDir()
		if os.Getenv(unprivEnv) != "" {
			// t.TempDir's parent is root's: make our own, ours.
			var err error
			if dir, err = os.MkdirTemp(os.Getenv(unprivEnv), "c"); err != nil {
				t.Fatal(err)
			}
		}
		d := New(dir)
		return d, d
	})
}

const unprivEnv = "GVX_HOSTDIR_UNPRIV_TMP"

// TestConformanceUnprivileged re-runs the conformance suite as uid 65534,
// which is how gvx runs in production: the privileged parts must fail with
// fs.ErrPermission (and be skipped), the rest must still hold.
func TestConformanceUnprivileged(t *testing.T) {
	if os.Getenv(unprivEnv) != "" {
		t.Skip("already unprivileged")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user (already unprivileged: TestConformance covers it)")
	}
	tmp := t.TempDir()
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(tmp), 0o755)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go build directory is private to root: run a copy.
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(tmp, "hostdir.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestConformance$", "-test.v")
	cmd.Env = append(os.Environ(), unprivEnv+"="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance as uid 65534: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("refuses privileged features")) || !bytes.Contains(out, []byte("--- PASS: TestConformance")) {
		t.Fatalf("unprivileged run did not take the unprivileged path:\n%s", out)
	}
}

// TestHolesStayHoles checks with the kernel's block counts that all-zero
// blocks are not written, including data past 5 GiB.
func TestHolesStayHoles(t *testing.T) {
	root := t.TempDir()
	d := New(root)
	if err := sinktest.EdgeTree(d, sinktest.TreeOptions{HugeSparse: true, Unprivileged: os.Geteuid() != 0, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path      string
		maxBlocks int64 // 512-byte units
	}{
		{"sparse/all-hole", 0},
		{"sparse/hole-middle", 3 * 8},
		{"sparse/past-5GiB", 64},
	} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, c.path), &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks > c.maxBlocks {
			t.Errorf("%s: %d blocks allocated, want at most %d", c.path, st.Blocks, c.maxBlocks)
		}
	}
	// And the contents read back right around the data.
	r, err := d.Open("sparse/past-5GiB")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := r.(*os.File)
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, 5<<30+4095); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 0 || buf[1] == 0 {
		t.Errorf("bytes around 5 GiB + 4 KiB: %v", buf)
	}
}

func TestSymlinkEscapeRefused(t *testing.T) {
	outside := t.TempDir()
	d := New(t.TempDir())
	if err := d.Symlink(&sink.Header{Path: "esc", Mode: sink.TypeSymlink | 0o777, Linkname: outside}); err != nil {
		t.Fatal(err)
	}
	err := d.WriteFile(&sink.Header{Path: "esc/pwned", Mode: sink.TypeReg | 0o644}, strings.NewReader(""))
	if !errors.Is(err, sink.ErrSymlinkInPath) {
		t.Fatalf("write through symlink: %v", err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Fatalf("wrote outside the tree: %v", names)
	}
}

// TestXattrTooLargeIsUnsupported: a value the filesystem cannot hold
// (ext4 without ea_inode keeps all xattrs in one block) is ErrUnsupported.
func TestXattrTooLargeIsUnsupported(t *testing.T) {
	d := New(t.TempDir())
	defer d.Close()
	err := d.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()),
		Xattrs: map[string][]byte{"user.big": make([]byte, 1<<16)}}, strings.NewReader(""))
	if err == nil {
		t.Skip("this filesystem holds 64 KiB xattrs")
	}
	if !errors.Is(err, sink.ErrUnsupported) {
		t.Fatalf("err = %v, want sink.ErrUnsupported", err)
	}
}

// TestInoDistinctAcrossMounts copies a directory holding two filesystems
// mounted side by side, each with a hard-linked file: tmpfs numbers its
// inodes per mount, so both roots are inode 1 and both files the same
// inode 2. Lstat used to give those numbers as they are: sink.Copy took
// the second mount's root for the first one again (a *DirLinkError, as
// for a hard link to a directory) and the second mount's file for a hard
// link to the first's. Ino now mixes in the device for entries off the
// root's.
func TestInoDistinctAcrossMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting tmpfs needs root")
	}
	dir := t.TempDir()
	for _, m := range []string{"m1", "m2"} {
		mp := filepath.Join(dir, m)
		if err := os.Mkdir(mp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("cannot mount tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })
		if err := os.WriteFile(filepath.Join(mp, "f"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(mp, "f"), filepath.Join(mp, "g")); err != nil {
			t.Fatal(err)
		}
	}
	d := New(dir)
	defer d.Close()
	h1, err1 := d.Lstat("m1")
	h2, err2 := d.Lstat("m2")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	t.Logf("m1 ino %#x, m2 ino %#x", h1.Ino, h2.Ino)
	dst := sinktest.NewMemFS()
	if err := sink.Copy(dst, d); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	for _, m := range []string{"m1", "m2"} {
		for _, n := range []string{"f", "g"} {
			r, err := dst.Open(m + "/" + n)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			b.ReadFrom(r)
			r.Close()
			if b.String() != m {
				t.Errorf("%s/%s holds %q, want %q", m, n, b.String(), m)
			}
		}
	}
}
