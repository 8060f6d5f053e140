package ext4lite

import (
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

func copyImage(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src)+".copy")
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

func needsRecovery(t *testing.T, img string) bool {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, disk.SuperblockSize)
	if _, err := f.ReadAt(b, disk.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	sb, _ := disk.DecodeSuperblock(b)
	return sb.FeatureIncompat&disk.IncompatRecover != 0
}

// TestJournalReplayedByE2fsckAndLinux leaves a committed but not
// checkpointed transaction in ext4lite's journal (as a crash right after
// the commit would) and has e2fsck, Linux and ext4lite each replay it: all
// three must show the committed tree.
func TestJournalReplayedByE2fsckAndLinux(t *testing.T) {
	needRoot(t)
	v, img := newVolume(t, 256<<20)
	want := sinktest.NewMemFS()
	for _, s := range []sink.Sink{want, v} {
		if err := sinktest.RandomTree(s, rand.New(rand.NewPCG(11, 11)), sinktest.TreeOptions{Entries: 400}); err != nil {
			t.Fatal(err)
		}
	}
	v.crashAfterCommit = true
	if err := v.Sync(); err != errCrashAfterCommit {
		t.Fatalf("Sync with the crash hook: %v", err)
	}
	// Abandon v: the file now holds the journal with one committed
	// transaction and nothing of it at home.
	if !needsRecovery(t, img) {
		t.Fatal("needs_recovery is not set after a commit")
	}
	opts := kernelCompare
	opts.IgnoreRoot = true
	compareWithout := func(t *testing.T, got sink.Source) {
		t.Helper()
		if err := sinktest.Compare(want, got, opts); err != nil {
			t.Error(err)
		}
	}

	t.Run("e2fsck", func(t *testing.T) {
		c := copyImage(t, img)
		out, err := exec.Command("e2fsck", "-fy", c).CombinedOutput()
		if code := exitCode(err); code != 0 && code != 1 {
			t.Fatalf("e2fsck -fy: exit %d\n%s", code, out)
		}
		e2fsckClean(t, c)
		mnt := mount(t, c, "ro")
		if err := os.Remove(filepath.Join(mnt, "lost+found")); err == nil {
			t.Fatal("ro mount is writable")
		}
		compareWithout(t, skipLostFound{hostSrc(t, mnt)})
	})
	t.Run("linux", func(t *testing.T) {
		c := copyImage(t, img)
		mnt := mount(t, c, "rw") // the kernel replays at mount
		hd := hostdir.New(mnt)
		compareWithout(t, skipLostFound{hd})
		hd.Close()
		umount(t, mnt)
		e2fsckClean(t, c)
	})
	t.Run("ext4lite", func(t *testing.T) {
		c := copyImage(t, img)
		r, err := Open(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		compareWithout(t, skipLostFound{r})
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		e2fsckClean(t, c)
	})
	t.Run("ext4lite read-only", func(t *testing.T) {
		c := copyImage(t, img)
		before, _ := os.ReadFile(c)
		r, err := Open(c, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		compareWithout(t, skipLostFound{r})
		r.Close()
		after, _ := os.ReadFile(c)
		if string(before) != string(after) {
			t.Error("a read-only open changed the file")
		}
	})
}

// TestReplayLinuxJournal copies a volume while Linux has it mounted with
// committed transactions in its journal; ext4lite's replay of one copy and
// e2fsck's of another must show the same tree, and ext4lite's result must
// be e2fsck-clean.
func TestReplayLinuxJournal(t *testing.T) {
	needRoot(t)
	img := filepath.Join(t.TempDir(), "k.ext4")
	if out, err := exec.Command("mkfs.ext4", "-F", "-q", img, "600M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := mount(t, img, "rw")
	defer umount(t, mnt)
	var dirty string
	for round := 0; round < 5 && dirty == ""; round++ {
		d := filepath.Join(mnt, "r", itoa(round))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		hd := hostdir.New(d)
		err := sinktest.RandomTree(hd, rand.New(rand.NewPCG(uint64(round), 5)), sinktest.TreeOptions{Entries: 300})
		hd.Close()
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 {
			os.RemoveAll(filepath.Join(mnt, "r", itoa(round-1)))
		}
		if out, err := exec.Command("sync", "-f", mnt).CombinedOutput(); err != nil {
			t.Fatalf("sync: %v\n%s", err, out)
		}
		c := copyImage(t, img)
		if needsRecovery(t, c) {
			dirty = c
		}
	}
	if dirty == "" {
		t.Skip("Linux checkpointed every transaction before the copy; nothing to replay")
	}
	ref := copyImage(t, dirty)
	out, err := exec.Command("e2fsck", "-fy", ref).CombinedOutput()
	if code := exitCode(err); code != 0 && code != 1 {
		t.Fatalf("e2fsck -fy: exit %d\n%s", code, out)
	}
	ours := copyImage(t, dirty)
	v, err := Open(ours, nil)
	if err != nil {
		t.Fatal(err)
	}
	refMnt := mount(t, ref, "ro")
	opts := kernelCompare
	if err := sinktest.Compare(hostSrc(t, filepath.Join(refMnt, "r")), subSource(t, v, "r"), opts); err != nil {
		t.Errorf("ext4lite's replay differs from e2fsck's: %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, ours)
}

func subSource(t *testing.T, v *FS, dir string) sink.Source {
	tr, err := v.Sub(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// skipLostFound hides /lost+found, which the compared trees lack.
type skipLostFound struct{ sink.Source }

func (s skipLostFound) ReadDir(p string) ([]string, error) {
	names, err := s.Source.ReadDir(p)
	if p != "." {
		return names, err
	}
	out := names[:0]
	for _, n := range names {
		if n != "lost+found" {
			out = append(out, n)
		}
	}
	return out, err
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

var _ = io.EOF
