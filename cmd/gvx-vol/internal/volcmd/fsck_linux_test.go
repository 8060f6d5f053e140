package volcmd_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
