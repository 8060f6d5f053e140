package ext4lite

import (
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
	args := []string{"-t", "ext4", "-o", "loop," + opts, img, dir}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %v: %v\n%s", args, err, out)
	}
	t.Cleanup(func() { umount(t, dir) })
	return dir
}

func umount(t testing.TB, dir string) {
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		if !strings.Contains(string(out), "not mounted") {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	}
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
		if err := sinktest.Compare(m, hostdir.New(filepath.Join(mnt, name)), opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
