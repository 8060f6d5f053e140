package jbd2

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInteropRecoverKernelJournal (interop B, kernel): Linux writes the
// journal — we loop-mount a mkfs.ext4 image, change files and directories
// (creates, deletes, hence revokes) with a sync after each round, and copy
// the image while it is still mounted, so the copy's journal holds
// committed transactions. Our Recover and e2fsck's replay of the copy must
// give identical images, and e2fsck -fn must find ours clean.
func TestInteropRecoverKernelJournal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop mount (CI runs as root)")
	}
	needTools(t, "mount", "umount", "sync")
	for _, bs := range []int{4096, 1024} {
		t.Run(fmt.Sprintf("bs=%d", bs), func(t *testing.T) { kernelJournal(t, bs) })
	}
}

func kernelJournal(t *testing.T, bs int) {
	img := mkfsImageBS(t, bs)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop,nosuid,nodev", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("loop mount unavailable: %v\n%s", err, out)
	}
	mounted := true
	umount := func() {
		if mounted {
			mounted = false
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount: %v\n%s", err, out)
			}
		}
	}
	t.Cleanup(umount)

	syncfs := func() { run(t, "sync", "-f", mnt) }
	for i := range 40 {
		d := filepath.Join(mnt, fmt.Sprintf("d%02d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte(strings.Repeat("x", 5000*i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	syncfs()
	for i := range 10 {
		if err := os.RemoveAll(filepath.Join(mnt, fmt.Sprintf("d%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	syncfs()
	for i := range 20 {
		os.Symlink("target", filepath.Join(mnt, fmt.Sprintf("d20/l%d", i)))
	}
	syncfs()
	dirty := filepath.Join(t.TempDir(), "dirty.img")
	copyFile(t, img, dirty)
	umount()

	dev := openImageDevice(t, dirty)
	j, err := Open(dev, dev.bs)
	if err != nil {
		t.Fatal(err)
	}
	if !j.NeedsRecovery() {
		t.Fatal("the copy's journal is clean: the test did not catch the kernel mid-journal")
	}
	// Linux sets revoke in the superblock lazily; 64bit and csum v3 it sets
	// at mount.
	if f := j.Features().Incompat; f&KernelFeatures.Incompat != KernelFeatures.Incompat {
		t.Errorf("kernel journal features %#x", f)
	}
	ours, st := replayBoth(t, dirty)
	t.Logf("kernel journal: %+v", st)
	if st.Transactions == 0 || st.Blocks == 0 {
		t.Errorf("nothing replayed: %+v", st)
	}
	e2fsckClean(t, ours)
}
