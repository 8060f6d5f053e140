package jbd2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"z.gfire.dev/gvx/jbd2/internal/disk"
)

// Helpers shared by the cross-checks against e2fsprogs and the kernel.

func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("cross-check needs %s (Debian package e2fsprogs): %v", tool, err)
		}
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mkfsImage makes a 64 MiB ext4 image with 4 KiB blocks, as Debian's
// mkfs.ext4 does by default (64bit, metadata_csum, internal journal).
func mkfsImage(t testing.TB) string { return mkfsImageBS(t, 4096) }

// mkfsImageBS makes a 64 MiB image with the given block size (Debian's
// mkfs.ext4 picks 1 KiB for volumes below 512 MiB) and mkfs options.
func mkfsImageBS(t testing.TB, bs int, opts ...string) string {
	t.Helper()
	needTools(t, "mkfs.ext4", "debugfs", "e2fsck", "dumpe2fs")
	img := filepath.Join(t.TempDir(), "fs.img")
	args := append([]string{"-F", "-q", "-b", strconv.Itoa(bs), "-E", "lazy_itable_init=0"}, opts...)
	run(t, "mkfs.ext4", append(args, img, "64M")...)
	return img
}

// e2fsckClean runs e2fsck -fn and fails the test unless it reports nothing.
func e2fsckClean(t testing.TB, img string) {
	t.Helper()
	out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -fn: %v\n%s", err, out)
	}
}

// journalBlocks lists the physical blocks of the journal inode (<8>).
func journalBlocks(t testing.TB, img string) []uint64 {
	t.Helper()
	out := run(t, "debugfs", "-R", "blocks <8>", img)
	var bl []uint64
	for _, f := range strings.Fields(out) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			continue // the "debugfs 1.47.0" banner
		}
		bl = append(bl, n)
	}
	if len(bl) < MinBlocks {
		t.Fatalf("journal has %d blocks: %q", len(bl), out)
	}
	return bl
}

// imageDevice is a journal BlockDevice over an ext4 image file, mapping
// journal block n to the journal inode's n-th physical block, and a
// HomeWriter for the image's own blocks.
type imageDevice struct {
	f      *os.File
	bs     int
	blocks []uint64
}

func openImageDevice(t testing.TB, img string) *imageDevice {
	t.Helper()
	bl := journalBlocks(t, img)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	bs := 1024 << binary.LittleEndian.Uint32(readExt4Super(t, img)[0x18:]) // s_log_block_size
	return &imageDevice{f: f, bs: bs, blocks: bl}
}

func (d *imageDevice) ReadBlock(n uint32, p []byte) error {
	if int(n) >= len(d.blocks) {
		return fmt.Errorf("journal block %d out of range", n)
	}
	_, err := d.f.ReadAt(p, int64(d.blocks[n])*int64(d.bs))
	return err
}

func (d *imageDevice) WriteBlock(n uint32, p []byte) error {
	if int(n) >= len(d.blocks) {
		return fmt.Errorf("journal block %d out of range", n)
	}
	_, err := d.f.WriteAt(p, int64(d.blocks[n])*int64(d.bs))
	return err
}

func (d *imageDevice) WriteBlocks(n uint32, p []byte) error {
	for off := 0; off < len(p); off += d.bs {
		if err := d.WriteBlock(n, p[off:off+d.bs]); err != nil {
			return err
		}
		n++
	}
	return nil
}

func (d *imageDevice) NumBlocks() uint32 { return uint32(len(d.blocks)) }

func (d *imageDevice) Flush() error { return d.f.Sync() }

func (d *imageDevice) WriteHome(fsBlock uint64, p []byte) error {
	_, err := d.f.WriteAt(p, int64(fsBlock)*int64(d.bs))
	return err
}

func (d *imageDevice) readFS(t testing.TB, fsBlock uint64) []byte {
	t.Helper()
	p := make([]byte, d.bs)
	if _, err := d.f.ReadAt(p, int64(fsBlock)*int64(d.bs)); err != nil {
		t.Fatal(err)
	}
	return p
}

// ext4 superblock fields used by the tests (offsets within the 1 KiB
// superblock at byte 1024 of the image).
const (
	ext4SbOff           = 1024
	ext4OffBlocksLo     = 0x04
	ext4OffIncompat     = 0x60
	ext4OffUUID         = 0x68
	ext4OffBlocksHi     = 0x150
	ext4OffChecksum     = 0x3FC
	ext4IncompatRecover = 0x4 // EXT4_FEATURE_INCOMPAT_RECOVER (needs_recovery)
	ext4OffState        = 0x3A
	ext4StateErrors     = 0x2 // EXT4_ERROR_FS
)

func readExt4Super(t testing.TB, img string) []byte {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 1024)
	if _, err := f.ReadAt(p, ext4SbOff); err != nil {
		t.Fatal(err)
	}
	return p
}

func fsUUID(t testing.TB, img string) [16]byte {
	var u [16]byte
	copy(u[:], readExt4Super(t, img)[ext4OffUUID:])
	return u
}

func fsBlocksCount(t testing.TB, img string) uint64 {
	sb := readExt4Super(t, img)
	return uint64(binary.LittleEndian.Uint32(sb[ext4OffBlocksLo:])) |
		uint64(binary.LittleEndian.Uint32(sb[ext4OffBlocksHi:]))<<32
}

// setNeedsRecovery sets or clears the ext4 needs_recovery incompat flag and
// refreshes the superblock checksum (crc32c(~0, first 1020 bytes), stored
// little-endian, as ext4_superblock_csum computes it).
func setNeedsRecovery(t testing.TB, img string, on bool) {
	t.Helper()
	sb := readExt4Super(t, img)
	v := binary.LittleEndian.Uint32(sb[ext4OffIncompat:])
	if on {
		v |= ext4IncompatRecover
	} else {
		v &^= ext4IncompatRecover
	}
	binary.LittleEndian.PutUint32(sb[ext4OffIncompat:], v)
	writeExt4Super(t, img, sb)
}

// setFSErrors sets EXT4_ERROR_FS in s_state, as e2fsck does (and the
// caller of Recover must) when a replay was aborted at a corrupt
// transaction.
func setFSErrors(t testing.TB, img string) {
	t.Helper()
	sb := readExt4Super(t, img)
	binary.LittleEndian.PutUint16(sb[ext4OffState:], binary.LittleEndian.Uint16(sb[ext4OffState:])|ext4StateErrors)
	writeExt4Super(t, img, sb)
}

// writeExt4Super writes the ext4 superblock back with a fresh checksum.
func writeExt4Super(t testing.TB, img string, sb []byte) {
	t.Helper()
	binary.LittleEndian.PutUint32(sb[ext4OffChecksum:], disk.CRC32C(^uint32(0), sb[:ext4OffChecksum]))
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(sb, ext4SbOff); err != nil {
		t.Fatal(err)
	}
}

// dumpJournalFields returns dumpe2fs -h's lines about the journal.
func dumpJournalFields(t testing.TB, img string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(run(t, "dumpe2fs", "-h", img), "\n") {
		if strings.HasPrefix(l, "Journal") || strings.HasPrefix(l, "Total journal") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func zeroJournal(t testing.TB, d *imageDevice) {
	t.Helper()
	z := make([]byte, d.bs)
	for n := range d.blocks {
		if err := d.WriteBlock(uint32(n), z); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// maskExt4Super zeroes the ext4 superblock fields a replay may set apart
// from the blocks it replays: s_wtime (0x30), s_kbytes_written (0x178) and
// s_checksum (0x3FC) — e2fsck stamps the first two when it writes.
func maskExt4Super(img []byte) {
	sb := img[ext4SbOff : ext4SbOff+1024]
	clear(sb[0x30:0x34])
	clear(sb[0x178:0x180])
	clear(sb[ext4OffChecksum : ext4OffChecksum+4])
}

// sameImages requires two image files to be byte-identical apart from
// maskExt4Super's fields, naming the 4 KiB blocks that differ.
func sameImages(t testing.TB, a, b string) {
	t.Helper()
	pa, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa) != len(pb) {
		t.Fatalf("image sizes %d and %d", len(pa), len(pb))
	}
	maskExt4Super(pa)
	maskExt4Super(pb)
	var diff []string
	for off := 0; off < len(pa); off += 4096 {
		if !bytes.Equal(pa[off:off+4096], pb[off:off+4096]) {
			for i := off; i < off+4096; i++ {
				if pa[i] != pb[i] {
					diff = append(diff, fmt.Sprintf("block %d (first at byte %#x)", off/4096, i-off))
					break
				}
			}
		}
	}
	if len(diff) > 0 {
		t.Fatalf("%s and %s differ in %d blocks: %s", filepath.Base(a), filepath.Base(b), len(diff), strings.Join(diff[:min(len(diff), 20)], ", "))
	}
}

// replayBoth recovers img with our Recover into one copy and with
// `e2fsck -E journal_only` into another, and requires identical results.
// It returns our copy and our stats.
func replayBoth(t testing.TB, img string) (string, Stats) {
	t.Helper()
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours.img"), filepath.Join(dir, "e2fsck.img")
	copyFile(t, img, ours)
	copyFile(t, img, theirs)

	dev := openImageDevice(t, ours)
	st, err := Recover(dev, dev.bs, dev, fsBlocksCount(t, ours))
	if err != nil {
		t.Fatalf("our recovery: %v", err)
	}
	setNeedsRecovery(t, ours, false)
	if st.Aborted != "" {
		setFSErrors(t, ours)
	}

	out, err := exec.Command("e2fsck", "-y", "-E", "journal_only", theirs).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -E journal_only: %v\n%s", err, out)
	}
	sameImages(t, ours, theirs)
	return ours, st
}
