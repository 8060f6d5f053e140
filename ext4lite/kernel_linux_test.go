package ext4lite

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// e2fsckClean runs e2fsck -fn and fails unless it exits 0 and prints
// nothing but its pass headers and the summary line.
func e2fsckClean(t testing.TB, img string) {
	t.Helper()
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck not installed (apt-get install e2fsprogs)")
	}
	out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput()
	var extra []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.HasPrefix(l, "e2fsck "), strings.HasPrefix(l, "Pass "),
			strings.Contains(l, " files (") && strings.Contains(l, " blocks"):
		default:
			extra = append(extra, l)
		}
	}
	if err != nil || len(extra) > 0 {
		t.Fatalf("e2fsck -fn %s: %v\n%s", img, err, out)
	}
}

// needRoot skips unless the test can loop-mount.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel cross-check needs root for loop mounts (CI runs as root)")
	}
}

// mount loop-mounts img at a temp dir and unmounts it at cleanup.
func mount(t testing.TB, img string, opts string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-t", "ext4", "-o", "loop,nosuid,nodev," + opts, img, dir}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %v: %v\n%s", args, err, out)
	}
	t.Cleanup(func() { umount(t, dir) })
	return dir
}

// umount unmounts dir and waits until its loop device lets go of the
// image: umount(8) returns while the filesystem lives on if another mount
// namespace (made by any process meanwhile) still holds it, unflushed, and
// e2fsck would then read stale metadata.
func umount(t testing.TB, dir string) {
	dev := loopOf(dir)
	var backing []byte
	bf := ""
	if strings.HasPrefix(dev, "/dev/loop") {
		bf = filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
		backing, _ = os.ReadFile(bf)
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		if !strings.Contains(string(out), "not mounted") {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
		return
	}
	if len(backing) == 0 {
		return
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(bf); err != nil || string(b) != string(backing) {
			return
		}
	}
	t.Errorf("%s still backs %s a minute after umount (mounted in another namespace?)", dev, strings.TrimSpace(string(backing)))
}

// loopOf returns the source device of the mount at dir, or "".
func loopOf(dir string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 10 || f[4] != dir {
			continue
		}
		for i := 6; i+2 < len(f); i++ {
			if f[i] == "-" {
				return f[i+2]
			}
		}
	}
	return ""
}

// kernelCompare is what differs legitimately between a tree as written and
// as the kernel shows it: ctime (set by the kernel on every change) and
// directory sizes.
var kernelCompare = sinktest.CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreAtime: true}

// TestKernelReadsWhatExt4liteWrites writes random and edge-case trees,
// checks e2fsck is clean, mounts the volume with Linux and compares every
// entry with the intended tree: content, type, mode, owner, size, symlink
// target, rdev, hard-link groups, xattrs incl. trusted.*, mtime to the ns.
func TestKernelReadsWhatExt4liteWrites(t *testing.T) {
	needRoot(t)
	huge := os.Getenv("GVX_SHORT") == ""
	v, img := newVolume(t, 8<<30)
	want := map[string]*sinktest.MemFS{}
	gen := map[string]func(s sink.Sink) error{
		"random": func(s sink.Sink) error {
			return sinktest.RandomTree(s, rand.New(rand.NewPCG(7, 7)), sinktest.TreeOptions{Entries: 2000})
		},
		"edge": func(s sink.Sink) error {
			return sinktest.EdgeTree(s, sinktest.TreeOptions{HugeDir: huge, HugeSparse: huge})
		},
	}
	for name, g := range gen {
		if err := v.Mkdir(&sink.Header{Path: name, Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
		tr, err := v.Sub(name)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = sinktest.NewMemFS()
		if err := g(want[name]); err != nil {
			t.Fatal(err)
		}
		if err := g(tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	mnt := mount(t, img, "ro")
	for name, m := range want {
		opts := kernelCompare
		opts.IgnoreRoot = true
		if err := sinktest.Compare(m, hostSrc(t, filepath.Join(mnt, name)), opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestKernelWrittenVolume: a volume made by mkfs.ext4 and changed by Linux
// (renames, deletes, rewrites, xattr changes, a directory the kernel
// indexed) reads in ext4lite exactly as the kernel shows it; ext4lite then
// writes into it, e2fsck stays clean and the kernel sees both trees.
func TestKernelWrittenVolume(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed")
	}
	img := filepath.Join(t.TempDir(), "k.ext4")
	if out, err := exec.Command("mkfs.ext4", "-F", "-q", img, "600M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := mount(t, img, "rw")
	k := filepath.Join(mnt, "k")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(k, 0o755))
	hk := hostdir.New(k)
	must(sinktest.RandomTree(hk, rand.New(rand.NewPCG(3, 3)), sinktest.TreeOptions{Entries: 1500}))
	must(os.Mkdir(filepath.Join(k, "big"), 0o755))
	for i := 0; i < 5000; i++ {
		must(os.WriteFile(filepath.Join(k, "big", "file-"+strings.Repeat("x", i%40)+itoa(i)), []byte(itoa(i)), 0o644))
	}
	// Kernel-side changes: renames, deletes, rewrites, xattrs.
	names, err := hk.ReadDir(".")
	hk.Close()
	must(err)
	for i, n := range names {
		p := filepath.Join(k, n)
		switch i % 7 {
		case 0:
			must(os.Rename(p, p+".renamed"))
		case 1:
			must(os.RemoveAll(p))
		case 2:
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				must(os.WriteFile(p, []byte("rewritten by the kernel "+n), 0o640))
			}
		case 3:
			must(setxattr(p, "trusted.kernel", []byte("set by linux")))
		}
	}
	for i := 0; i < 5000; i += 3 {
		must(os.Remove(filepath.Join(k, "big", "file-"+strings.Repeat("x", i%40)+itoa(i))))
	}
	umount(t, mnt)

	// What the kernel shows, snapshotted.
	mnt = mount(t, img, "ro")
	kernelK := sinktest.NewMemFS()
	hk = hostdir.New(filepath.Join(mnt, "k"))
	must(sink.Copy(kernelK, hk))
	hk.Close()
	umount(t, mnt)

	v, err := Open(img, nil)
	must(err)
	tk, err := v.Sub("k")
	must(err)
	opts := kernelCompare
	opts.IgnoreRoot = true
	if err := sinktest.Compare(kernelK, tk, opts); err != nil {
		t.Fatalf("ext4lite reads the kernel's tree differently: %v", err)
	}

	// ext4lite writes: a new tree, and changes inside the kernel's tree
	// (mirrored in the snapshot).
	must(v.Mkdir(&sink.Header{Path: "w", Mode: sink.TypeDir | 0o755}))
	tw, err := v.Sub("w")
	must(err)
	wantW := sinktest.NewMemFS()
	must(sinktest.RandomTree(wantW, rand.New(rand.NewPCG(4, 4)), sinktest.TreeOptions{Entries: 800}))
	must(sinktest.RandomTree(tw, rand.New(rand.NewPCG(4, 4)), sinktest.TreeOptions{Entries: 800}))
	for _, s := range []sink.Sink{kernelK, tk} {
		for i := 0; i < 5000; i += 5 {
			must(s.RemoveAll("big/file-" + strings.Repeat("x", i%40) + itoa(i)))
		}
		for i := 0; i < 3000; i++ {
			must(s.WriteFile(&sink.Header{Path: "big/new-" + itoa(i), Mode: sink.TypeReg | 0o600, Size: 3}, strings.NewReader("new")))
		}
	}
	// Directory mtimes of "big" now differ (kernel vs ext4lite clock):
	// pin them in both.
	bh, err := kernelK.Lstat("big")
	must(err)
	must(tk.Mkdir(bh))
	must(kernelK.Mkdir(bh))
	must(v.Close())
	e2fsckClean(t, img)

	mnt = mount(t, img, "ro")
	if err := sinktest.Compare(kernelK, hostSrc(t, filepath.Join(mnt, "k")), opts); err != nil {
		t.Errorf("kernel tree after ext4lite's changes: %v", err)
	}
	if err := sinktest.Compare(wantW, hostSrc(t, filepath.Join(mnt, "w")), opts); err != nil {
		t.Errorf("ext4lite's tree as the kernel reads it: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func setxattr(p, name string, val []byte) error { return unix.Lsetxattr(p, name, val, 0) }

func noSpaceE2fsck(t *testing.T, img string) { e2fsckClean(t, img) }

// e2fsckAfterRecovery writes a recovered image to a file and runs e2fsck -fn.
func e2fsckAfterRecovery(t *testing.T, img []byte) {
	t.Helper()
	if _, err := exec.LookPath("e2fsck"); err != nil {
		return
	}
	p := filepath.Join(t.TempDir(), "recovered.ext4")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, p)
}

// hostSrc opens a host directory as a Source, closed at cleanup (before
// an unmount registered earlier: an open directory keeps a mount busy).
func hostSrc(t testing.TB, dir string) *hostdir.Dir {
	d := hostdir.New(dir)
	t.Cleanup(func() { d.Close() })
	return d
}
