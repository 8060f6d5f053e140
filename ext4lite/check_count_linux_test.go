package ext4lite

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// e2fsckSummary matches e2fsck's last line: "img: 12/4096 files (0.0%
// non-contiguous), 8214/16385 blocks".
var e2fsckSummary = regexp.MustCompile(`: (\d+)/\d+ files \(.*\), (\d+)/(\d+) blocks`)

// TestCheckCountsMatchE2fsck compares Check's inodes and blocks in use
// with e2fsck -fn's summary line on volumes with 1 KiB and 4 KiB blocks
// made by mke2fs and by ext4lite. e2fsck counts blocks_count minus the
// free blocks: on 1 KiB volumes that includes block 0 (the boot block,
// below s_first_data_block = 1), which Check once left out.
func TestCheckCountsMatchE2fsck(t *testing.T) {
	type vol struct {
		name string
		img  func(t *testing.T) string
	}
	mkfs := func(size string, opts ...string) func(t *testing.T) string {
		return func(t *testing.T) string {
			if _, err := exec.LookPath("mke2fs"); err != nil {
				t.Skip("mke2fs not installed (apt-get install e2fsprogs)")
			}
			img := filepath.Join(t.TempDir(), "mkfs.ext4")
			args := append(append([]string{"-F", "-q", "-t", "ext4"}, opts...), img, size)
			if out, err := exec.Command("mke2fs", args...).CombinedOutput(); err != nil {
				t.Fatalf("mke2fs %v: %v\n%s", args, err, out)
			}
			return img
		}
	}
	ours := func(size int64, bs int) func(t *testing.T) string {
		return func(t *testing.T) string { return ckVolume(t, size, bs, ckRandomTree(21, 200)) }
	}
	for _, tc := range []vol{
		{"mke2fs-1k-64M", mkfs("64M", "-b", "1024")},
		{"mke2fs-1k-20M-nojournal", mkfs("20M", "-b", "1024", "-O", "^has_journal")},
		{"mke2fs-1k-300M", mkfs("300M", "-b", "1024", "-O", "^resize_inode")},
		{"mke2fs-4k-64M", mkfs("64M", "-b", "4096")},
		{"mke2fs-4k-200M", mkfs("200M", "-b", "4096", "-O", "^flex_bg")},
		{"ext4lite-1k-64M", ours(64<<20, 1024)},
		{"ext4lite-4k-128M", ours(128<<20, 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := tc.img(t)
			code, out := ckE2fsck(t, img)
			if code != 0 {
				t.Fatalf("e2fsck -fn exit %d:\n%s", code, out)
			}
			m := e2fsckSummary.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no summary line in e2fsck's output:\n%s", out)
			}
			files, _ := strconv.ParseUint(m[1], 10, 64)
			blocks, _ := strconv.ParseUint(m[2], 10, 64)
			r := ckFile(t, img)
			if !r.Clean() {
				t.Fatal(r.Err())
			}
			if uint64(r.Inodes) != files || r.Blocks != blocks {
				t.Errorf("Check: %d inodes, %d blocks in use; e2fsck: %s files, %s/%s blocks", r.Inodes, r.Blocks, m[1], m[2], m[3])
			}
		})
	}
}
