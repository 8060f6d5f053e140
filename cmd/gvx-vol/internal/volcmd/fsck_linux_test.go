package volcmd_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFsckOrphanFile: gvx-vol fsck checks a volume mke2fs ≥ 1.47 made with
// orphan_file (before, it refused it with exit 8): exit 0 when clean, 4
// with a finding when an orphan file block's tail is damaged, as its
// documented exit codes say.
func TestFsckOrphanFile(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("mke2fs not installed (apt-get install e2fsprogs)")
	}
	vol := filepath.Join(t.TempDir(), "of.ext4")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-O", "orphan_file,metadata_csum_seed", vol, "16M").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "orphan_file") {
			t.Skipf("the host's mke2fs does not know orphan_file (needs e2fsprogs ≥ 1.47): %s", out)
		}
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	if out, code := run(t, "fsck", vol); code != 0 || !strings.Contains(out, "clean") {
		t.Fatalf("fsck of mke2fs's orphan_file volume: exit %d\n%s", code, out)
	}
	// The orphan file's first block: debugfs would say where; read the
	// orphan file inode's in-inode extent (superblock s_orphan_file_inum
	// at 0x280, the inode table from group 0's descriptor).
	b, err := os.ReadFile(vol)
	if err != nil {
		t.Fatal(err)
	}
	sb := b[1024:]
	ino := binary.LittleEndian.Uint32(sb[0x280:])
	ipg, isz := binary.LittleEndian.Uint32(sb[0x28:]), uint32(binary.LittleEndian.Uint16(sb[0x58:]))
	if ino == 0 || ino > ipg {
		t.Fatalf("orphan file inode %d (want one in group 0)", ino)
	}
	gd := b[2*1024:] // 1 KiB blocks: descriptors in block 2
	itable := uint64(binary.LittleEndian.Uint32(gd[8:])) | uint64(binary.LittleEndian.Uint32(gd[0x28:]))<<32
	in := b[itable*1024+uint64(ino-1)*uint64(isz):]
	first := uint64(binary.LittleEndian.Uint16(in[0x28+12+6:]))<<32 | uint64(binary.LittleEndian.Uint32(in[0x28+12+8:]))
	b[first*1024+1024-8] ^= 0xFF // ob_magic
	if err := os.WriteFile(vol, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "fsck", vol)
	if code != 4 || !strings.Contains(out, "orphan file block 0: orphan file block magic") {
		t.Fatalf("fsck with a bad orphan block magic: exit %d, want 4 naming it\n%s", code, out)
	}
}

// crashSnapshot makes a volume with orphan_file by mke2fs, mounts it,
// writes files and, with keepOrphan, unlinks one while it is held open,
// then copies the image while still mounted (a crash: needs_recovery set,
// the journal holding the writes, orphan_present with keepOrphan). It
// skips unless root (loop mounts) and mke2fs ≥ 1.47 are there.
func crashSnapshot(t *testing.T, keepOrphan bool) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a crashed volume needs root for a loop mount (CI runs as root)")
	}
	for _, tool := range []string{"mke2fs", "e2fsck", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	img, snap, mnt := filepath.Join(dir, "live.ext4"), filepath.Join(dir, "crashed.ext4"), filepath.Join(dir, "mnt")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-O", "orphan_file,metadata_csum_seed", img, "32M").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "orphan_file") {
			t.Skipf("the host's mke2fs does not know orphan_file (needs e2fsprogs ≥ 1.47): %s", out)
		}
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	}()
	for i := 0; i < 50; i++ {
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", i*100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if keepOrphan {
		held, err := os.Create(filepath.Join(mnt, "held"))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		if _, err := held.WriteString("unlinked while open"); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(held.Name()); err != nil {
			t.Fatal(err)
		}
	}
	syscall.Sync()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return snap
}

// e2fsckAfterReplay replays a copy of img's journal with e2fsck -E
// journal_only, then returns e2fsck -fn's exit code on it: what e2fsck
// finds in the recovered volume.
func e2fsckAfterReplay(t *testing.T, img string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	cp := img + ".replayed"
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", cp).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -E journal_only: %v\n%s", err, out)
	}
	out, err := exec.Command("e2fsck", "-fn", cp).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestFsckNeedsRecovery: on a volume whose journal needs recovery, fsck -n
// says so, replays in memory and lists the replayed volume's findings (no
// "needs_recovery" finding: that is what it replayed), with e2fsck's exit
// code on the recovered volume; fsck without -n on a volume that also has
// orphan_present (which ext4lite cannot open read-write) falls back to the
// same in-memory check with a message, not exit 8. The file is unchanged.
func TestFsckNeedsRecovery(t *testing.T) {
	for _, orphan := range []bool{false, true} {
		t.Run(fmt.Sprintf("orphan=%v", orphan), func(t *testing.T) {
			img := crashSnapshot(t, orphan)
			before, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			wantCode, e2out := e2fsckAfterReplay(t, img)
			t.Logf("e2fsck -fn after the replay: exit %d\n%s", wantCode, e2out)
			args := [][]string{{"fsck", "-n", img}}
			if orphan {
				args = append(args, []string{"fsck", img})
			}
			for _, a := range args {
				out, code := run(t, a...)
				t.Logf("gvx-vol %v: exit %d\n%s", a, code, out)
				if code != wantCode {
					t.Errorf("gvx-vol %v: exit %d, e2fsck after the replay %d\n%s", a, code, wantCode, out)
				}
				if !strings.Contains(out, "the journal needs recovery") || !strings.Contains(out, "replayed in memory only") || !strings.Contains(out, "the file still needs") {
					t.Errorf("gvx-vol %v does not say the replay was in memory only:\n%s", a, out)
				}
				if strings.Contains(out, "(needs_recovery)") {
					t.Errorf("gvx-vol %v lists needs_recovery as a finding of the replayed volume:\n%s", a, out)
				}
				if orphan && !strings.Contains(out, "in the orphan file") {
					t.Errorf("gvx-vol %v does not list the orphan:\n%s", a, out)
				}
				if len(a) == 2 && !strings.Contains(out, "cannot be opened read-write") {
					t.Errorf("gvx-vol %v does not say why it did not replay into the file:\n%s", a, out)
				}
				if after, _ := os.ReadFile(img); !bytes.Equal(after, before) {
					t.Fatalf("gvx-vol %v changed the file", a)
				}
			}
		})
	}
}
