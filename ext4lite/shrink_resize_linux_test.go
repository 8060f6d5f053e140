package ext4lite

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// Shrinking volumes made by mke2fs with its defaults, resize_inode
// included (shrink_resize.go).

// mke2fsBy makes an ext4 volume of size at img with the named mke2fs
// ("host", or "sid": sid's 1.47.4 with its own mke2fs.conf, when
// bench/sidroot.sh cached a root) and extra options; it skips the test
// when that mke2fs is not there.
func mke2fsBy(t testing.TB, maker, img, size string, opts ...string) {
	t.Helper()
	args := append(append([]string{"-F", "-q", "-t", "ext4"}, opts...), img, size)
	var cmd *exec.Cmd
	switch maker {
	case "host":
		if _, err := exec.LookPath("mke2fs"); err != nil {
			t.Skip("mke2fs not installed (apt-get install e2fsprogs)")
		}
		cmd = exec.Command("mke2fs", args...)
	case "sid":
		root := ckSidRoot(t)
		lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
		cmd = exec.Command(filepath.Join(lib, "ld-linux-x86-64.so.2"),
			append([]string{"--library-path", lib, filepath.Join(root, "usr/sbin/mke2fs")}, args...)...)
		cmd.Env = append(os.Environ(), "MKE2FS_CONFIG="+filepath.Join(root, "etc/mke2fs.conf"))
	default:
		t.Fatalf("unknown mke2fs %q", maker)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
}

// resizeCases are mke2fs volumes with resize_inode: mke2fs's defaults,
// 1 KiB and 4 KiB blocks, with and without a journal. "1k-4gdt" has 64
// groups, four descriptor blocks and 256 reserved ones (the most a 1 KiB
// block addresses): shrunk to a few groups, three descriptor blocks become
// reserved ones or, past 256, are freed. "4k-2gdt" has 80 groups and two
// descriptor blocks, so one becomes reserved.
var resizeCases = []struct {
	name, size string
	opts       []string
}{
	{"defaults", "1G", nil},
	{"1k", "128M", []string{"-b", "1024"}},
	{"1k-4gdt", "512M", []string{"-b", "1024"}},
	{"4k", "1G", []string{"-b", "4096"}},
	{"4k-2gdt", "10G", []string{"-b", "4096"}},
	// -E resize= reserves room for growth to twice the size only: fewer
	// reserved blocks than one block addresses, so the shrink turns the
	// freed descriptor blocks into reserved ones (4+4 → 1+7, 2+1 → 1+2).
	{"1k-4gdt-resize", "512M", []string{"-b", "1024", "-E", "resize=1048576"}},
	{"4k-2gdt-resize", "10G", []string{"-b", "4096", "-E", "resize=5242880"}},
	{"4k-nojournal", "1G", []string{"-b", "4096", "-O", "^has_journal"}},
	{"1k-nojournal", "128M", []string{"-b", "1024", "-O", "^has_journal"}},
}

// TestShrinkResizeInode makes volumes with mke2fs (the host's and sid's),
// writes files through the kernel and through ext4lite that lie in the
// groups Shrink drops, shrinks them with ext4lite, and checks with the
// peers: e2fsck -fn is clean, debugfs reports the shrunk geometry with
// resize_inode kept, the kernel reads every file back byte-exact, and the
// kernel grows the mounted volume back online through the reserved
// descriptor blocks (which checks the rebuilt resize inode: Linux refuses
// one that does not list every backup), after which e2fsck stays clean.
func TestShrinkResizeInode(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("resize2fs"); err != nil {
		t.Skip("resize2fs not installed (apt-get install e2fsprogs)")
	}
	for _, maker := range []string{"host", "sid"} {
		for _, tc := range resizeCases {
			t.Run(maker+"/"+tc.name, func(t *testing.T) {
				img := filepath.Join(t.TempDir(), "vol.ext4")
				mke2fsBy(t, maker, img, tc.size, tc.opts...)
				shrinkResizeRoundTrip(t, img)
			})
		}
	}
}

func shrinkResizeRoundTrip(t *testing.T, img string) {
	before := debugfsStats(t, img)
	if !strings.Contains(before["Filesystem features"], "resize_inode") || before["Reserved GDT blocks"] == "" {
		t.Fatalf("mke2fs made no resize_inode: %v", before)
	}
	origSize := fileSize(t, img)
	// The kernel spreads directories made in the root over the groups
	// (Orlov), and Shrink cannot drop a group whose inodes are in use: the
	// kernel's directories go in one ext4lite made (they stay near it).
	v, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Mkdir(&sink.Header{Path: "k", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	kernelFill(t, img)
	v, err = Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext4liteFill(t, v)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	want := kernelSums(t, img)

	v, err = Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	high, err := highestDataBlock(v)
	if err != nil {
		t.Fatal(err)
	}
	size := shrinkByHalf(t, v)
	if high < v.blocksCount {
		t.Fatalf("nothing lay past the new end (block %d of %d): the test moved nothing", high, v.blocksCount)
	}
	blocks, groups, gdt, res := v.blocksCount, v.groupCount, v.gdtBlocks, v.sb.ReservedGdtBlocks
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, img); got != size {
		t.Fatalf("file is %d bytes after the shrink, Shrink said %d", got, size)
	}
	e2fsckClean(t, img)
	after := debugfsStats(t, img)
	t.Logf("%s blocks, %s reserved GDT → %s blocks (%d groups, %d descriptor blocks), %s reserved GDT",
		before["Block count"], before["Reserved GDT blocks"], after["Block count"], groups, gdt, after["Reserved GDT blocks"])
	for k, want := range map[string]string{
		"Block count":         strconv.FormatUint(blocks, 10),
		"Reserved GDT blocks": strconv.Itoa(int(res)),
		"Inode count":         strconv.FormatUint(uint64(groups)*uint64(v.inodesPerGroup), 10),
	} {
		if after[k] != want {
			t.Errorf("debugfs stats %s: %q, want %q", k, after[k], want)
		}
	}
	if !strings.Contains(after["Filesystem features"], "resize_inode") || strings.Contains(after["Filesystem features"], "meta_bg") {
		t.Errorf("features after the shrink: %s", after["Filesystem features"])
	}
	if want := wantResizeMap(v); !equalResizeMaps(debugfsResizeMap(t, img), want) {
		t.Errorf("debugfs reads the resize inode as\n%v\nwant\n%v", debugfsResizeMap(t, img), want)
	}
	if got := kernelSums(t, img); !equalSums(t, want, got) {
		t.Fatal("files changed in the shrink")
	}

	growBack(t, img, origSize)
	e2fsckClean(t, img)
	grown := debugfsStats(t, img)
	if grown["Block count"] != before["Block count"] || strings.Contains(grown["Filesystem features"], "meta_bg") {
		t.Errorf("after the online grow: %s blocks (want %s), features %s", grown["Block count"], before["Block count"], grown["Filesystem features"])
	}
	if got := kernelSums(t, img); !equalSums(t, want, got) {
		t.Fatal("files changed in the grow")
	}
}

// growBack grows the shrunk volume at img back to size bytes: online,
// through the kernel, when the test may (EXT4_IOC_RESIZE_FS needs
// CAP_SYS_RESOURCE): Linux turns reserved blocks into descriptor blocks
// and refuses a resize inode that does not list every backup
// (verify_reserved_gdb). Else offline with resize2fs, which rebuilds the
// resize inode from what the one ext4lite wrote.
func growBack(t *testing.T, img string, size int64) {
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if !hasCapSysResource() {
		t.Log("no CAP_SYS_RESOURCE here: growing offline with resize2fs, not online through the kernel")
		if out, err := exec.Command("resize2fs", "-f", img).CombinedOutput(); err != nil {
			t.Fatalf("resize2fs -f %s: %v\n%s", img, err, out)
		}
		return
	}
	mnt := mount(t, img, "rw")
	loop := loopOf(mnt)
	if out, err := exec.Command("losetup", "-c", loop).CombinedOutput(); err != nil {
		t.Fatalf("losetup -c %s: %v\n%s", loop, err, out)
	}
	if out, err := exec.Command("resize2fs", loop).CombinedOutput(); err != nil {
		t.Fatalf("online resize2fs %s: %v\n%s", loop, err, out)
	}
	umount(t, mnt)
}

// hasCapSysResource reports whether CAP_SYS_RESOURCE is in effect.
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// kernelFill writes files through the kernel whose data spans the groups
// Shrink drops: each file's first half is written, a preallocated filler
// takes most of the volume, the second halves go past it (the inodes stay
// low: Shrink cannot drop a group whose inodes are in use), then the
// filler is removed. A kept preallocated file holds unwritten extents.
func kernelFill(t *testing.T, img string) {
	mnt := mount(t, img, "rw")
	rng := rand.New(rand.NewPCG(7, 7))
	var files []*os.File
	var halves [][]byte
	for i, n := range []int{3 << 20, 200 << 10, 1, 0, 70 << 10} {
		dir := filepath.Join(mnt, "k", fmt.Sprintf("k%d", i%3), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data[:n/2]); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil { // allocated now, not at writeback
			t.Fatal(err)
		}
		files, halves = append(files, f), append(halves, data[n/2:])
	}
	pre, err := os.Create(filepath.Join(mnt, "k", "k0", "prealloc"))
	if err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(fill.Fd()), 0, 0, int64(st.Bavail)*st.Bsize*7/10); err != nil {
		t.Fatal(err)
	}
	fill.Close()
	for i, f := range files {
		if _, err := f.Write(halves[i]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Fallocate(int(pre.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := pre.WriteAt([]byte("written into an unwritten extent"), 300<<10); err != nil {
		t.Fatal(err)
	}
	pre.Close()
	if err := os.Symlink("k1/sub/f1", filepath.Join(mnt, "k", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	umount(t, mnt)
}

// ext4liteFill writes files through ext4lite into the last group, past
// anything Shrink keeps.
func ext4liteFill(t *testing.T, v *FS) {
	v.allocCursor = v.groupFirstBlock(v.groupCount - 1)
	data := bytes.Repeat([]byte("ext4lite in the last group "), 40<<10)
	for _, d := range []string{"e", "e/deep"} {
		if err := v.Mkdir(&sink.Header{Path: d, Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []string{"e/one", "e/two", "e/deep/three"} {
		h := &sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: int64(len(data) >> i),
			Xattrs: map[string][]byte{"user.big": bytes.Repeat([]byte{'x'}, 900)}}
		if err := v.WriteFile(h, bytes.NewReader(data[:len(data)>>i])); err != nil {
			t.Fatal(err)
		}
	}
}

// highestDataBlock is the highest block in use that is no group's
// superblock, descriptors, bitmap or inode table.
func highestDataBlock(v *FS) (uint64, error) {
	itb := (uint64(v.inodesPerGroup)*uint64(v.inodeSize) + uint64(v.bs) - 1) / uint64(v.bs)
	meta := map[uint64]bool{}
	for _, gr := range v.groups {
		meta[gr.desc.BlockBitmap()], meta[gr.desc.InodeBitmap()] = true, true
		for b := gr.desc.InodeTable(); b < gr.desc.InodeTable()+itb; b++ {
			meta[b] = true
		}
	}
	for g := int(v.groupCount) - 1; g >= 0; g-- {
		bm, err := v.blockBitmapOf(uint32(g))
		if err != nil {
			return 0, err
		}
		first := v.groupFirstBlock(uint32(g))
		for i := int(v.groupBlocks(uint32(g))) - 1; i >= int(v.superOverhead(uint32(g))); i-- {
			if testBit(bm, uint32(i)) && !meta[first+uint64(i)] {
				return first + uint64(i), nil
			}
		}
	}
	return 0, nil
}

// kernelSums mounts img read-only and returns the sha256 (or link
// target) of every file and directory in it, lost+found aside.
func kernelSums(t *testing.T, img string) map[string]string {
	mnt := mount(t, img, "ro")
	defer umount(t, mnt)
	sums := map[string]string{}
	err := filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mnt, p)
		if rel == "lost+found" {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			sums[rel] = "-> " + target
			return err
		case d.IsDir():
			sums[rel] = "dir"
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		sums[rel] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func equalSums(t *testing.T, want, got map[string]string) bool {
	t.Helper()
	ok := len(want) == len(got)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
			ok = false
		}
	}
	return ok
}

// wantResizeMap is what inode 7 must map on v: each reserved descriptor
// block of group 0 (an indirect block) to its copies in the backup groups.
func wantResizeMap(v *FS) map[uint64][]uint64 {
	m := map[uint64][]uint64{}
	for i := uint64(0); i < uint64(v.sb.ReservedGdtBlocks); i++ {
		p := v.firstDataBlock + 1 + uint64(v.gdtBlocks) + i
		m[p] = []uint64{}
		for g := uint32(1); g < v.groupCount; g++ {
			if v.hasSuper(g) {
				m[p] = append(m[p], p+uint64(g)*uint64(v.blocksPerGroup))
			}
		}
	}
	return m
}

var debugfsBlock = regexp.MustCompile(`\((IND|DIND|[0-9]+)\):([0-9]+)`)

// debugfsResizeMap is what debugfs says inode 7 maps: each indirect
// block to the blocks it lists.
func debugfsResizeMap(t *testing.T, img string) map[uint64][]uint64 {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "stat <7>", img).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs -R 'stat <7>' %s: %v\n%s", img, err, out)
	}
	m := map[uint64][]uint64{}
	var ind uint64
	for _, f := range debugfsBlock.FindAllStringSubmatch(string(out), -1) {
		b, _ := strconv.ParseUint(f[2], 10, 64)
		switch f[1] {
		case "DIND":
		case "IND":
			ind, m[b] = b, []uint64{}
		default:
			m[ind] = append(m[ind], b)
		}
	}
	if regexp.MustCompile(`\([0-9]+-[0-9]+\)`).Match(out) {
		t.Fatalf("debugfs printed a range of blocks for inode 7 (not parsed here):\n%s", out)
	}
	return m
}

func equalResizeMaps(a, b map[uint64][]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		if fmt.Sprint(x) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}

var debugfsLine = regexp.MustCompile(`^([A-Za-z][A-Za-z ]*[a-z]):\s+(.*)$`)

// debugfsStats is debugfs -R stats' superblock lines, by name.
func debugfsStats(t *testing.T, img string) map[string]string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "stats", img).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs -R stats %s: %v\n%s", img, err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, " Group") {
			break
		}
		if s := debugfsLine.FindStringSubmatch(l); s != nil {
			m[s[1]] = strings.TrimSpace(s[2])
		}
	}
	return m
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestShrinkResizeInodeCrash cuts a shrink of an mke2fs volume (1 KiB
// blocks, resize_inode, journal) at write after write, drops a random
// subset of the unsynced ones, and recovers: the volume is either as
// before or shrunk, Check and e2fsck -fn find nothing (the rebuilt
// resize inode commits with the new geometry, never apart from it), and
// the files read back unchanged. Every write within 40 of a sync is cut
// (the flushes: commits and checkpoints), and every 40th of the block
// copies between them; e2fsck checks every third cut near a sync.
func TestShrinkResizeInodeCrash(t *testing.T) {
	c := newShrinkCrash(t)
	files, full, oldLog := c.files, c.full, c.oldLog
	opened, total, oldBlocks, newBlocks := c.opened, c.total, c.oldBlocks, c.newBlocks
	near := c.nearSyncs()
	t.Logf("shrink from %d to %d blocks: writes %d..%d, %d syncs", oldBlocks, newBlocks, opened, total, len(full.marks))
	rng := rand.New(rand.NewPCG(3, 4))
	shrunk, cuts, leaks := 0, 0, 0
	for limit := opened + 1; limit <= total; limit++ {
		if !near[limit] && limit%40 != 0 {
			continue
		}
		cuts++
		after := c.crashAt(t, limit, rng)
		blocks, leaked, err := checkShrinkRecovered(after, files, oldLog)
		if err != nil {
			t.Fatalf("crash at write %d of %d: %v", limit, total, err)
		}
		if leaked {
			leaks++
		}
		if near[limit] && cuts%3 == 0 {
			e2fsckAfterRecovery(t, after) // as ext4lite's replay left it (e2fsck -n does not replay)
		}
		if blocks != oldBlocks && blocks != newBlocks {
			t.Fatalf("crash at write %d: %d blocks, neither %d nor %d", limit, blocks, oldBlocks, newBlocks)
		}
		if blocks == newBlocks {
			shrunk++
		}
	}
	t.Logf("%d cuts, %d left the volume shrunk, %d the old log leaked", cuts, shrunk, leaks)
	if leaks > 20 {
		t.Errorf("%d cuts leaked the old log: more than the writes between the commit that moves it and the one that frees it", leaks)
	}
	if shrunk == 0 || shrunk == cuts {
		t.Errorf("%d of %d cuts left a shrunk volume: the cuts missed the commit", shrunk, cuts)
	}
}

// shrinkCrash is a crash test's volume: an mke2fs volume (1 KiB blocks,
// resize_inode, a 1 MiB journal in the group Shrink drops) holding files
// in its last group, and the writes of a shrink of it run to the end.
type shrinkCrash struct {
	base                 []byte
	files                map[string][]byte
	full                 *syncMarks // the full run's device
	opened, total        int        // writes after opening, after the shrink
	oldBlocks, newBlocks uint64
	oldLog               [][2]uint64 // the journal's blocks past the new end
}

func newShrinkCrash(t *testing.T) *shrinkCrash {
	img := filepath.Join(t.TempDir(), "vol.ext4")
	mke2fsBy(t, "host", img, "16M", "-b", "1024", "-J", "size=1")
	v, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.allocCursor = v.groupFirstBlock(v.groupCount - 1)
	c := &shrinkCrash{files: map[string][]byte{"a": bytes.Repeat([]byte("crash "), 30<<10), "b": []byte("small")}}
	for name, data := range c.files {
		if err := v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if c.base, err = os.ReadFile(img); err != nil {
		t.Fatal(err)
	}
	c.full = &syncMarks{crashDev: newCrashDev(c.base, 0)}
	if v, err = OpenDevice(c.full, nil); err != nil {
		t.Fatal(err)
	}
	c.opened, c.oldBlocks = c.full.writes, v.blocksCount
	if _, err := v.Shrink(); err != nil {
		t.Fatal(err)
	}
	c.total, c.newBlocks = c.full.writes, v.blocksCount
	c.oldLog = movedLogOf(t, c.base, c.newBlocks)
	return c
}

// crashAt is the image a crash at write limit of the shrink leaves.
func (c *shrinkCrash) crashAt(t *testing.T, limit int, rng *rand.Rand) []byte {
	d := newCrashDev(c.base, limit)
	v, err := OpenDevice(d, nil)
	if err == nil {
		if _, err := v.Shrink(); err == nil {
			t.Fatalf("Shrink did not see the crash at write %d", limit)
		}
	}
	return d.afterCrash(rng)
}

// TestShrinkCrashKernelReplays: Linux mounts what a shrink cut at a write
// leaves (every third cut near a sync; it replays the journal itself),
// writes 3 MiB and unmounts; Check and e2fsck -fn then find the volume old
// or shrunk and consistent (the old log leaked at the worst, see
// checkShrinkRecovered) and every file, the kernel's included, intact.
// Linux keeps the geometry it read before the replay (and, by the same
// token, the journal inode: why Shrink frees the old log a flush after
// the move; this sample does not catch the other order), so a cut between the
// commit of the new geometry and its superblock going home is refused
// until e2fsck replays it (which must find nothing else); that window is
// a write or two wide.
func TestShrinkCrashKernelReplays(t *testing.T) {
	needRoot(t)
	c := newShrinkCrash(t)
	rng := rand.New(rand.NewPCG(5, 6))
	kdata := bytes.Repeat([]byte("kernel "), 450<<10) // 3 MiB, of the 8 MiB the shrunk volume has
	files := maps.Clone(c.files)
	files["kfile"] = kdata
	near, leaks, refused := c.nearSyncs(), 0, 0
	for n, limit := 0, c.opened+1; limit <= c.total; limit++ {
		if !near[limit] {
			continue
		}
		if n++; n%3 != 0 {
			continue
		}
		img := filepath.Join(t.TempDir(), "crashed.ext4")
		if err := os.WriteFile(img, c.crashAt(t, limit, rng), 0o644); err != nil {
			t.Fatal(err)
		}
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-t", "ext4", "-o", "loop,nosuid,nodev", img, mnt).CombinedOutput(); err != nil {
			// Linux checks the descriptors before it replays and keeps the
			// geometry it read then: after a cut between the commit of the
			// new geometry and its superblock reaching home, it refuses the
			// volume (the dropped groups' descriptors are gone) until a
			// replay by e2fsck (or ext4lite), which must find nothing else.
			refused++
			t.Logf("crash at write %d: Linux refuses it before a replay: %s", limit, bytes.TrimSpace(out))
			fy, _ := exec.Command("e2fsck", "-fy", img).CombinedOutput()
			for _, l := range strings.Split(strings.TrimSpace(string(fy)), "\n") {
				if !strings.HasPrefix(l, "e2fsck ") && !strings.HasPrefix(l, "Pass ") && !strings.Contains(l, "recovering journal") &&
					!strings.Contains(l, " files (") && l != "" {
					t.Fatalf("crash at write %d: e2fsck -fy found more than a journal to replay:\n%s", limit, fy)
				}
			}
			mnt = mount(t, img, "rw")
		} else {
			t.Cleanup(func() { umount(t, mnt) })
		}
		if err := os.WriteFile(filepath.Join(mnt, "kfile"), kdata, 0o644); err != nil {
			t.Fatalf("crash at write %d: the kernel's write: %v", limit, err)
		}
		umount(t, mnt)
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		_, leaked, err := checkShrinkRecovered(b, files, c.oldLog)
		if err != nil {
			t.Fatalf("crash at write %d, then Linux: %v", limit, err)
		}
		if leaked {
			leaks++
		}
		e2fsckAfterRecovery(t, b)
	}
	t.Logf("%d cuts leaked the old log; Linux refused %d before a replay", leaks, refused)
	if refused > 2 {
		t.Errorf("Linux refused %d cuts: more than the window between the new geometry's commit and its superblock going home", refused)
	}
}

// nearSyncs are the writes within 40 of a sync of the full run: the
// flushes (commits and checkpoints).
func (c *shrinkCrash) nearSyncs() map[int]bool {
	near := map[int]bool{}
	for _, m := range c.full.marks {
		for w := m - 40; w <= m+40; w++ {
			near[w] = true
		}
	}
	return near
}

// syncMarks is a crashDev that notes how many writes preceded each sync.
type syncMarks struct {
	*crashDev
	marks []int
}

func (s *syncMarks) Sync() error {
	s.marks = append(s.marks, s.writes)
	return s.crashDev.Sync()
}

// checkShrinkRecovered opens img (replaying the journal), checks it,
// reads files back and returns its block count. A cut between the commit
// that moves the journal and the one that frees its old blocks (oldLog)
// leaves those in use but owned by nothing (Shrink frees them only once
// the move is home: Linux, replaying the move, would keep logging there);
// that alone is accepted, as leaked: they are freed and Check must then
// find nothing.
func checkShrinkRecovered(img []byte, files map[string][]byte, oldLog [][2]uint64) (blocks uint64, leaked bool, err error) {
	d := newCrashDev(img, 0)
	v, err := OpenDevice(d, nil)
	if err != nil {
		return 0, false, fmt.Errorf("reopen: %w", err)
	}
	defer v.Close()
	rep, err := v.Check(nil)
	if err != nil {
		return 0, false, fmt.Errorf("check: %w", err)
	}
	if len(rep.Findings) > 0 && len(oldLog) > 0 && oldLog[0][0] < v.blocksCount {
		journal, err := v.getInode(v.sb.JournalInum)
		if err != nil {
			return 0, false, err
		}
		m, err := v.loadExtents(journal)
		if err != nil {
			return 0, false, err
		}
		if m.ext[len(m.ext)-1].Start < oldLog[0][0] { // the journal moved
			for _, r := range oldLog {
				if err := v.releaseBlocks(r[0], r[1]); err != nil {
					return 0, false, fmt.Errorf("freeing the leaked old log: %w (findings %v)", err, rep.Findings)
				}
			}
			if rep, err = v.Check(nil); err != nil {
				return 0, false, err
			}
			leaked = true
		}
	}
	if len(rep.Findings) > 0 {
		return 0, false, fmt.Errorf("check after recovery (leaked log freed: %v): %v", leaked, rep.Findings)
	}
	for name, data := range files {
		r, err := v.Open(name)
		if err != nil {
			return 0, false, err
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			return 0, false, fmt.Errorf("%s: %d bytes (%v), want %d", name, len(got), err, len(data))
		}
	}
	blocks = v.blocksCount
	if err := v.Close(); err != nil {
		return 0, false, fmt.Errorf("close: %w", err)
	}
	copy(img, d.durable)
	return blocks, leaked, nil
}

// movedLogOf is where the journal of the volume img lies past end.
func movedLogOf(t *testing.T, img []byte, end uint64) [][2]uint64 {
	t.Helper()
	v, err := OpenDevice(newCrashDev(img, 0), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	j, err := v.getInode(v.sb.JournalInum)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v.loadExtents(j)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]uint64
	for _, e := range m.ext {
		if lo := max(e.Start, end); lo < e.Start+uint64(e.Len) {
			out = append(out, [2]uint64{lo, e.Start + uint64(e.Len) - lo})
		}
	}
	if len(out) == 0 {
		t.Fatal("the journal lies below the new end: the test moves no journal")
	}
	return out
}

// TestShrinkResizeInodeCorrupt: a volume whose reserved descriptor count
// or inode 7 is not what e2fsck and Linux expect is refused with
// ErrCorrupt naming the resize inode and the fix, before anything moves;
// the volume keeps its size and files.
func TestShrinkResizeInodeCorrupt(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base.ext4")
	mke2fsBy(t, "host", base, "32M", "-b", "1024")
	v, err := Open(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.allocCursor = v.groupFirstBlock(v.groupCount - 1)
	data := bytes.Repeat([]byte("corrupt "), 10<<10)
	if err := v.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	setReserved := func(im *ckImage, n uint16) {
		binary.LittleEndian.PutUint16(im.b[disk.SuperblockOffset+0xCE:], n)
		im.fixSuper()
	}
	editInode := func(fn func(in *disk.Inode)) func(t *testing.T, im *ckImage) {
		return func(t *testing.T, im *ckImage) {
			in := im.inode(disk.ResizeIno)
			fn(in)
			im.putInode(disk.ResizeIno, in)
		}
	}
	dindOf := func(im *ckImage) []byte {
		return im.block(uint64(binary.LittleEndian.Uint32(im.inode(disk.ResizeIno).Block[4*disk.DindBlock:])))
	}
	gdt := func(im *ckImage) uint64 { // descriptor blocks
		groups := (im.sb.BlocksCount() - uint64(im.sb.FirstDataBlock) + uint64(im.sb.BlocksPerGroup) - 1) / uint64(im.sb.BlocksPerGroup)
		return (groups*uint64(im.sb.DescSize) + uint64(im.bs) - 1) / uint64(im.bs)
	}
	for _, tc := range []struct {
		name, want string
		corrupt    func(t *testing.T, im *ckImage)
	}{
		{"reserved past one block", "s_reserved_gdt_blocks is 257", func(t *testing.T, im *ckImage) { setReserved(im, 257) }},
		{"reserved without the feature", "without resize_inode", func(t *testing.T, im *ckImage) {
			c := binary.LittleEndian.Uint32(im.b[disk.SuperblockOffset+0x5C:])
			binary.LittleEndian.PutUint32(im.b[disk.SuperblockOffset+0x5C:], c&^uint32(disk.CompatResizeInode))
			im.fixSuper()
		}},
		{"no double-indirect block", "outside the filesystem", editInode(func(in *disk.Inode) {
			binary.LittleEndian.PutUint32(in.Block[4*disk.DindBlock:], 0)
		})},
		{"double-indirect past the end", "outside the filesystem", editInode(func(in *disk.Inode) {
			binary.LittleEndian.PutUint32(in.Block[4*disk.DindBlock:], 1<<30)
		})},
		{"double-indirect on the descriptors", "superblock and descriptors", editInode(func(in *disk.Inode) {
			binary.LittleEndian.PutUint32(in.Block[4*disk.DindBlock:], 2)
		})},
		{"direct block", "i_block[0]", editInode(func(in *disk.Inode) { binary.LittleEndian.PutUint32(in.Block[0:], 5000) })},
		{"a directory", "not a regular file", editInode(func(in *disk.Inode) { in.Mode = disk.ModeDir | 0o600 })},
		{"unlinked", "not a regular file", editInode(func(in *disk.Inode) { in.LinksCount = 0 })},
		{"double-indirect entry", "want reserved descriptor block", func(t *testing.T, im *ckImage) {
			d := dindOf(im)
			off := 4 * gdt(im)
			binary.LittleEndian.PutUint32(d[off:], binary.LittleEndian.Uint32(d[off:])+1)
		}},
		{"backup entry", "want its copy", func(t *testing.T, im *ckImage) {
			p := im.block(uint64(im.sb.FirstDataBlock) + 1 + gdt(im) + 7)
			binary.LittleEndian.PutUint32(p[4:], 12345)
		}},
		{"garbage double-indirect", "want reserved descriptor block", func(t *testing.T, im *ckImage) {
			rng := rand.New(rand.NewPCG(5, 5))
			for i, d := 0, dindOf(im); i < len(d); i++ {
				d[i] = byte(rng.Uint32())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ckCorrupted(t, base, tc.corrupt)
			v, err := Open(p, nil)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			before := v.blocksCount
			_, err = v.Shrink()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "resize inode") ||
				!strings.Contains(err.Error(), "e2fsck -f") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Shrink: %v; want ErrCorrupt about the resize inode saying %q and naming e2fsck -f", err, tc.want)
			}
			t.Log(err)
			if v.blocksCount != before {
				t.Errorf("%d blocks after the refusal, %d before", v.blocksCount, before)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Open(p, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			f, err := r.Open("f")
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(f); !bytes.Equal(got, data) || r.blocksCount != before {
				t.Errorf("after the refusal: f %d bytes (want %d), %d blocks (want %d)", len(got), len(data), r.blocksCount, before)
			}
		})
	}
}
