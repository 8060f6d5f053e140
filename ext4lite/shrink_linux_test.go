package ext4lite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// TestShrink fills a 2 GiB volume across its groups, deletes most of it,
// and shrinks: blocks in the dropped groups (file data, directories,
// xattr blocks, the journal in the middle of the volume) move, the file
// gets smaller, and e2fsck, Check and Linux agree the tree is unchanged.
func TestShrink(t *testing.T) {
	v, img := newVolume(t, 2<<30)
	want := sinktest.NewMemFS()
	for _, s := range []sink.Sink{want, v} {
		if err := sinktest.RandomTree(s, rand.New(rand.NewPCG(21, 21)), sinktest.TreeOptions{Entries: 400}); err != nil {
			t.Fatal(err)
		}
	}
	// Spread big files over the groups, then delete most of them.
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	for i := 0; i < 20; i++ {
		h := &sink.Header{Path: fmt.Sprintf("big%02d", i), Mode: sink.TypeReg | 0o644, Size: int64(len(big))}
		if err := v.WriteFile(h, bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 19; i++ {
		if err := v.Remove(fmt.Sprintf("big%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	size := shrinkByHalf(t, v)
	if fi, _ := os.Stat(img); fi.Size() != size {
		t.Fatalf("file is %d bytes, volume %d", fi.Size(), size)
	}
	if _, err := v.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	r, err := Open(img, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Check(nil)
	if err != nil || len(rep.Findings) > 0 {
		t.Fatalf("check: %v %v", err, rep.Findings)
	}
	f, err := r.Open("big19")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	if !bytes.Equal(got, big) {
		t.Fatal("big19 changed in the move")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The kernel sees the same tree (big19 aside).
	if err := want.WriteFile(&sink.Header{Path: "big19", Mode: sink.TypeReg | 0o644, Size: int64(len(big))}, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	needRoot(t)
	mnt := mount(t, img, "ro")
	opts := kernelCompare
	opts.IgnoreRoot = true
	if err := sinktest.Compare(want, skipLostFound{hostSrc(t, mnt)}, opts); err != nil {
		t.Error(err)
	}
}

// TestShrinkMke2fs1K shrinks a 64 MiB volume with 1 KiB blocks made by
// mke2fs: flex_bg puts all eight groups' bitmaps and inode tables (4112
// blocks) in group 0, and the 4 MiB journal sits in the middle. The
// dropped groups' tables are freed only after the move, so the plan must
// not pick one group (the journal would not fit beside them: it failed
// with "no space" moving inode 8). e2fsck and Linux accept the result.
func TestShrinkMke2fs1K(t *testing.T) {
	v, img, data := mke2fs1K(t)
	if size := shrinkByHalf(t, v); size != int64(v.blocksCount)*1024 {
		t.Fatalf("Shrink says %d bytes for %d blocks of 1 KiB", size, v.blocksCount)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	needRoot(t)
	got, err := os.ReadFile(filepath.Join(mount(t, img, "ro"), "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("f after the shrink: %v (%d bytes, want %d)", err, len(got), len(data))
	}
}

// shrinkByHalf shrinks v and fails unless it lost at least half its blocks.
func shrinkByHalf(t *testing.T, v *FS) int64 {
	t.Helper()
	before := v.blocksCount
	size, err := v.Shrink()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shrunk from %d to %d blocks (%d bytes)", before, v.blocksCount, size)
	if v.blocksCount >= before/2 {
		t.Fatalf("shrank only from %d to %d blocks", before, v.blocksCount)
	}
	return size
}

// mke2fs1K opens a 64 MiB volume with 1 KiB blocks made by mke2fs (its 4
// MiB journal in the middle) holding a 100 KiB file f, and returns f's
// contents.
func mke2fs1K(t *testing.T) (*FS, string, []byte) {
	t.Helper()
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("mke2fs not installed (apt-get install e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "1k.ext4")
	if out, err := exec.Command("mke2fs", "-F", "-q", "-t", "ext4", "-b", "1024", "-O", "^resize_inode", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	v, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("shrink 1k "), 10<<10)
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return v, img, data
}

// TestShrinkFailedMoveForgotten: a move that runs out of room (the plan
// Shrink used to make for mke2fs1K's volume: one group, where the journal
// does not fit beside the other groups' tables) leaves the volume as it
// was, and it stays usable: before, Close wrote the dropped groups'
// filled bitmaps and e2fsck found every block in use.
func TestShrinkFailedMoveForgotten(t *testing.T) {
	v, img, data := mke2fs1K(t)
	if err := v.flushMetadata(); err != nil {
		t.Fatal(err)
	}
	err := v.moveOut(1)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "as before the shrink") {
		t.Fatalf("moving everything into one group: %v, want ErrNoSpace saying the volume is unchanged", err)
	}
	if err := v.WriteFile(&sink.Header{Path: "g", Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	needRoot(t)
	mnt := mount(t, img, "ro")
	for _, name := range []string{"f", "g"} {
		if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s after the failed move: %v (%d bytes, want %d)", name, err, len(got), len(data))
		}
	}
}
