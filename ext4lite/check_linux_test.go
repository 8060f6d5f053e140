package ext4lite

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// ckE2fsck runs `e2fsck -fn img` and returns its exit code and output
// (0 clean, 4 errors left uncorrected, 8 operational error; -1 when it
// ran past a minute: e2fsck itself can loop on some corrupt images, and
// then prints without end, so only the first 64 KiB of output are kept).
func ckE2fsck(t testing.TB, img string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck not installed (apt-get install e2fsprogs)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "e2fsck", "-fn", img)
	out := &ckCapped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, out.String() + "\n[e2fsck timed out]"
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("e2fsck: %v", err)
	return 0, ""
}

// ckBothClean fails unless e2fsck -fn and Check both find the volume at
// img clean; when says at what point of the test.
func ckBothClean(t testing.TB, img, when string) {
	t.Helper()
	e2fsckClean(t, img)
	if err := ckFile(t, img).Err(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// ckCapped keeps the first max bytes written to it.
type ckCapped struct {
	bytes.Buffer
	max int
}

func (c *ckCapped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// ckMkfs makes an image of size with mkfs.ext4 and the given options,
// filled from dir when it is not empty.
func ckMkfs(t testing.TB, size string, dir string, opts ...string) string {
	t.Helper()
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed (apt-get install e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "mkfs.ext4")
	args := append([]string{"-F", "-q", "-E", "lazy_itable_init=1"}, opts...)
	if dir != "" {
		args = append(args, "-d", dir)
	}
	args = append(args, img, size)
	if out, err := exec.Command("mkfs.ext4", args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %v: %v\n%s", args, err, out)
	}
	return img
}

// ckHostTree writes a random tree into a fresh host directory (devices,
// owners and trusted xattrs only as root).
func ckHostTree(t testing.TB, seed uint64, entries int, xattrs bool) string {
	t.Helper()
	dir := t.TempDir()
	o := sinktest.TreeOptions{Entries: entries, MaxFileSize: 32 << 10, NoXattrs: !xattrs}
	if os.Geteuid() != 0 {
		o.Unprivileged, o.UID, o.GID = true, uint32(os.Getuid()), uint32(os.Getgid())
	}
	hd := hostdir.New(dir)
	defer hd.Close()
	if err := sinktest.RandomTree(hd, rand.New(rand.NewPCG(seed, seed)), o); err != nil {
		t.Fatal(err)
	}
	// A directory big enough for mkfs to index it.
	big := filepath.Join(dir, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i++ {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("entry-%04d-%s", i, strings.Repeat("x", i%30))), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCheckCleanAgreesE2fsck: volumes ext4lite makes are clean under both
// Check and e2fsck -fn.
func TestCheckCleanAgreesE2fsck(t *testing.T) {
	for _, tc := range ckCases {
		t.Run(tc.name, func(t *testing.T) {
			img := ckVolume(t, tc.size, tc.bs, tc.fill)
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Errorf("e2fsck -fn exit %d:\n%s", code, out)
			}
			if err := ckFile(t, img).Err(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCheckMkfsImages: mkfs.ext4 -d images, with Debian's defaults and
// with the variations other tools make (1 KiB blocks, 128-byte inodes,
// crc16 descriptors, no resize inode, 32-bit), are clean under Check.
func TestCheckMkfsImages(t *testing.T) {
	// Random xattrs of a few KiB need 4 KiB blocks; the small profile
	// (1 KiB blocks) gets a tree without them.
	withX, noX := ckHostTree(t, 11, 300, true), ckHostTree(t, 12, 300, false)
	for _, tc := range []struct {
		name, size string
		opts       []string
	}{
		{"default-small", "16M", nil},
		{"default-4k", "64M", []string{"-b", "4096"}},
		{"debian-large", "600M", nil},
		{"inode128", "32M", []string{"-I", "128"}},
		{"uninit_bg", "32M", []string{"-O", "^metadata_csum,uninit_bg"}},
		{"no-resize-inode", "32M", []string{"-O", "^resize_inode"}},
		{"32bit", "32M", []string{"-O", "^64bit"}},
		{"no-journal", "32M", []string{"-O", "^has_journal"}},
		{"4k-uninit_bg", "64M", []string{"-b", "4096", "-O", "^metadata_csum,uninit_bg"}},
		{"empty", "8M", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := noX
			if strings.Contains(strings.Join(tc.opts, " "), "4096") || tc.size == "600M" {
				d = withX
			}
			if tc.name == "empty" {
				d = ""
			}
			img := ckMkfs(t, tc.size, d, tc.opts...)
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Fatalf("e2fsck -fn exit %d on mkfs's own image:\n%s", code, out)
			}
			if err := ckFile(t, img).Err(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCheckKernelWritten: a volume (made by mkfs.ext4 or by ext4lite) the kernel changed (creates, renames,
// deletes, xattrs, an htree grown by splits, hard links) is clean under
// Check after unmount.
func TestCheckKernelWritten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to loop-mount (CI runs as root)")
	}
	for _, size := range []string{"64M", "600M", "ext4lite-64M", "ext4lite-1k-64M"} {
		t.Run(size, func(t *testing.T) {
			var img string
			switch size {
			case "ext4lite-64M":
				// A volume ext4lite made (with its journal), then the kernel.
				img = ckVolume(t, 64<<20, 4096, ckRandomTree(8, 100))
			case "ext4lite-1k-64M":
				img = ckVolume(t, 64<<20, 1024, ckRandomTree(9, 100))
			default:
				img = ckMkfs(t, size, "")
			}
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "ext4", "-o", "loop,nosuid,nodev", img, mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount: %v\n%s", err, out)
			}
			mounted := true
			unmount := func() {
				if mounted {
					ckUmount(t, mnt)
					mounted = false
				}
			}
			t.Cleanup(unmount)
			o := sinktest.TreeOptions{Entries: 300, MaxFileSize: 64 << 10, NoXattrs: strings.HasSuffix(size, "64M")}
			hd := hostdir.New(mnt)
			err := sinktest.RandomTree(hd, rand.New(rand.NewPCG(3, 3)), o)
			hd.Close() // its cached directory handles would keep the mount busy
			if err != nil {
				t.Fatal(err)
			}
			big := filepath.Join(mnt, "big")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.Mkdir(big, 0o755))
			for i := 0; i < 8000; i++ {
				must(os.WriteFile(filepath.Join(big, fmt.Sprintf("kernel-entry-%05d", i)), []byte{byte(i)}, 0o644))
			}
			for i := 0; i < 8000; i += 3 {
				must(os.Remove(filepath.Join(big, fmt.Sprintf("kernel-entry-%05d", i))))
			}
			for i := 1; i < 8000; i += 30 {
				must(os.Rename(filepath.Join(big, fmt.Sprintf("kernel-entry-%05d", i)), filepath.Join(mnt, fmt.Sprintf("moved-%d", i))))
				must(os.Link(filepath.Join(mnt, fmt.Sprintf("moved-%d", i)), filepath.Join(big, fmt.Sprintf("hard-%d", i))))
			}
			must(os.WriteFile(filepath.Join(mnt, "frag"), nil, 0o644))
			f, err := os.OpenFile(filepath.Join(mnt, "frag"), os.O_WRONLY, 0)
			must(err)
			for i := 0; i < 400; i++ {
				_, err := f.WriteAt([]byte("x"), int64(i)*8192)
				must(err)
			}
			must(f.Close())
			unmount()
			// umount returns before the loop device has written the last
			// superblock back (seen here: up to 2 s); wait for it.
			if err := ckWaitUnmounted(img); err != nil {
				t.Fatalf("%v: the kernel has not let go of the volume", err)
			}
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Fatalf("e2fsck -fn exit %d after the kernel wrote:\n%s", code, out)
			}
			if err := ckFile(t, img).Err(); err != nil {
				t.Error(err)
			}
		})
	}
}

// ckWaitUnmounted waits (up to 30 s) until the image's superblock says
// the kernel let go of it: clean state, no journal recovery pending.
func ckWaitUnmounted(img string) error {
	var sb *disk.Superblock
	for i := 0; i < 120; i++ {
		f, err := os.Open(img)
		if err != nil {
			return err
		}
		raw := make([]byte, disk.SuperblockSize)
		_, err = f.ReadAt(raw, disk.SuperblockOffset)
		f.Close()
		if err != nil {
			return err
		}
		if sb, err = disk.DecodeSuperblock(raw); err != nil {
			return err
		}
		if sb.State&disk.StateValid != 0 && sb.FeatureIncompat&disk.IncompatRecover == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("after unmount the superblock still says state %#x, incompat %#x", sb.State, sb.FeatureIncompat)
}

// ckUmount unmounts dir, retrying while something else on the machine
// briefly holds it busy; as a last resort it detaches lazily so no mount
// outlives the test.
func ckUmount(t testing.TB, dir string) {
	t.Helper()
	var out []byte
	var err error
	for i := 0; i < 20; i++ {
		if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	exec.Command("umount", "-l", dir).Run()
	t.Fatalf("umount %s: %v\n%s", dir, err, out)
}

// TestCheckOrphans: files unlinked while open stay on the orphan list.
// A copy of the volume taken then (a crash) is reported by e2fsck -fn and
// by Check; with AllowOrphans, and after Close frees them, it is clean.
func TestCheckOrphans(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vol.ext4")
	v, err := Create(p, 16<<20, &CreateOptions{BlockSize: 1024, Time: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	data := strings.Repeat("x", 20000)
	for _, n := range []string{"a", "b", "c"} {
		ckUnlinkOpen(t, v, n, data)
	}
	r, err := v.Check(&CheckOptions{AllowOrphans: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("live volume with AllowOrphans: %v", err)
	}
	crash, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(t.TempDir(), "crash.ext4")
	if err := os.WriteFile(q, crash, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := ckE2fsck(t, q)
	if code == 0 {
		t.Logf("e2fsck -fn is clean on an orphan list:\n%s", out)
	}
	r = ckFile(t, q)
	if r.Clean() || !strings.Contains(r.Err().Error(), "orphan list") {
		t.Errorf("Check of the crash copy: %v", r.Err())
	}
	if len(r.Findings) != 1 {
		t.Errorf("want exactly the orphan finding, got %v", r.Err())
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out := ckE2fsck(t, p); code != 0 {
		t.Errorf("after Close: e2fsck exit %d\n%s", code, out)
	}
	if err := ckFile(t, p).Err(); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestCheckCorruptionsAgreeE2fsck: for each targeted corruption, whenever
// e2fsck -fn reports a problem, Check does too.
func TestCheckCorruptionsAgreeE2fsck(t *testing.T) {
	base := ckCorruptBase(t)
	if code, out := ckE2fsck(t, base); code != 0 {
		t.Fatalf("base volume: e2fsck exit %d\n%s", code, out)
	}
	for _, tc := range ckCorruptions {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := ckCorrupted(t, base, tc.fn)
			code, out := ckE2fsck(t, p)
			r := ckFile(t, p)
			switch {
			case code != 0 && r.Clean():
				t.Errorf("e2fsck exit %d, Check found nothing:\n%s", code, out)
			case code == 0:
				t.Logf("e2fsck clean, Check: %v", r.Err())
			}
		})
	}
}

// TestCheckRandomCorruption flips bytes of a small volume's metadata at
// random: Check must never panic, and must find something whenever
// e2fsck -fn does. Disagreements the other way are logged.
func TestCheckRandomCorruption(t *testing.T) {
	iters := 300
	if n, err := strconv.Atoi(os.Getenv("GVX_CHECK_ITERS")); err == nil {
		iters = n
	} else if testing.Short() {
		iters = 60
	}
	// Bases: the corruption-test volume (ext4lite, 1 KiB blocks, big
	// htree) and the fuzz seeds (ext4lite and mkfs.ext4, 1 and 4 KiB).
	bases := []*ckImage{ckLoad(t, ckCorruptBase(t))}
	for _, s := range loadFuzzSeeds(t) {
		im, err := ckParse(s.img)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, im)
	}
	var targets [][]ckRange
	for _, im := range bases {
		rs, err := ckMetadataRanges(im)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, rs)
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	p := filepath.Join(t.TempDir(), "fuzzed.ext4")
	var missed, extra, both int
	for i := 0; i < iters; i++ {
		k := i % len(bases)
		im0, targets := bases[k], targets[k]
		b := bytes.Clone(im0.b)
		nflips := 1 + rng.IntN(4)
		var desc []string
		for j := 0; j < nflips; j++ {
			r := targets[rng.IntN(len(targets))]
			off := r.off + rng.IntN(r.n)
			old := b[off]
			switch rng.IntN(5) {
			case 0:
				b[off] ^= 1 << rng.IntN(8)
			case 1:
				b[off] = byte(rng.IntN(256))
			case 2:
				b[off] = 0
			case 3:
				// Zero a span (a lost sector's worth of a structure).
				n := min(8+rng.IntN(120), r.off+r.n-off)
				clear(b[off : off+n])
				desc = append(desc, fmt.Sprintf("base %d %s+%d: %d bytes zeroed", k, r.what, off-r.off, n))
				continue
			default:
				// Copy bytes of another structure over this one (a
				// misdirected write).
				src := targets[rng.IntN(len(targets))]
				n := min(16+rng.IntN(240), r.off+r.n-off, src.n)
				so := src.off + rng.IntN(src.n-n+1)
				copy(b[off:off+n], im0.b[so:so+n])
				desc = append(desc, fmt.Sprintf("base %d %s+%d: %d bytes from %s+%d", k, r.what, off-r.off, n, src.what, so-src.off))
				continue
			}
			desc = append(desc, fmt.Sprintf("base %d %s+%d: %#x→%#x", k, r.what, off-r.off, old, b[off]))
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := ckE2fsck(t, p)
		var r *CheckReport
		var cerr error
		func() {
			defer func() {
				if x := recover(); x != nil {
					t.Fatalf("iteration %d (%s): Check panicked: %v", i, strings.Join(desc, ", "), x)
				}
			}()
			r, cerr = Check(memDevice(b), nil)
		}()
		found := cerr != nil || !r.Clean()
		switch {
		case code != 0 && !found:
			missed++
			t.Errorf("iteration %d (%s): e2fsck exit %d, Check found nothing:\n%s", i, strings.Join(desc, ", "), code, ckTrim(out))
		case code == 0 && found:
			extra++
			what := fmt.Sprint(cerr)
			if cerr == nil {
				what = r.Err().Error()
			}
			t.Logf("iteration %d (%s): e2fsck clean, Check: %s", i, strings.Join(desc, ", "), ckTrimLine(what))
		case code != 0:
			both++
		}
	}
	t.Logf("%d iterations: both found %d, only e2fsck %d, only Check %d", iters, both, missed, extra)
}

func ckTrim(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 15 {
		lines = append(lines[:15], "…")
	}
	return strings.Join(lines, "\n")
}

func ckTrimLine(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestFuzzSeedRegen rewrites FuzzOpen's seed images in testdata/ when
// GVX_REGEN_SEEDS is set; each must pass e2fsck -fn.
func TestFuzzSeedRegen(t *testing.T) {
	if os.Getenv("GVX_REGEN_SEEDS") == "" {
		t.Skip("set GVX_REGEN_SEEDS=1 to regenerate testdata/seed-*.img.gz")
	}
	for _, n := range fuzzSeedNames {
		if only := os.Getenv("GVX_REGEN_SEEDS"); only != "1" && only != n {
			continue
		}
		bs := 1024
		if strings.Contains(n, "4k") {
			bs = 4096
		}
		var extra []string
		size := "2M"
		switch {
		case strings.HasSuffix(n, "-desc128"):
			extra = []string{"-O", "64bit", "-E", "desc_size=128"}
		case strings.HasSuffix(n, "-orphanfile"):
			// The orphan file wants a journal (the smallest: 1024 blocks).
			extra, size = []string{"-O", "orphan_file,metadata_csum_seed,has_journal", "-J", "size=1"}, "3M"
		}
		var img []byte
		if strings.HasPrefix(n, "mkfs") {
			dir := t.TempDir()
			hd := hostdir.New(dir)
			err := fuzzSmallTree(hd, bs)
			hd.Close()
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "img")
			args := append([]string{"-F", "-q", "-b", strconv.Itoa(bs), "-N", "256", "-O", "^has_journal",
				"-U", "6776782d-7365-6564-0000-000000000001", "-E", "hash_seed=6776782d-7365-6564-0000-000000000002"}, extra...)
			out, err := exec.Command("mkfs.ext4", append(args, "-d", dir, p, size)...).CombinedOutput()
			if err != nil {
				t.Fatalf("mkfs.ext4: %v\n%s", err, out)
			}
			if img, err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		} else {
			uuid := [16]byte{0x67, 0x76, 0x78, 0x2d, 0x66, 0x75, 0x7a, 0x7a}
			dev := memDevice(make([]byte, 2<<20))
			v, err := Format(dev, int64(len(dev)), &CreateOptions{BlockSize: bs, UUID: &uuid,
				Time: time.Unix(1700000000, 0), InodeRatio: 64 << 20, Inodes: 256})
			if err != nil {
				t.Fatal(err)
			}
			if err := fuzzSmallTree(v, bs); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			img = dev
		}
		p := filepath.Join(t.TempDir(), "check.img")
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out := ckE2fsck(t, p); code != 0 {
			t.Fatalf("%s: e2fsck exit %d\n%s", n, code, out)
		}
		var buf bytes.Buffer
		z, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		z.Write(img)
		z.Close()
		if err := os.WriteFile(filepath.Join("testdata", "seed-"+n+".img.gz"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes, %d compressed", n, len(img), buf.Len())
	}
}

func init() { ckPeerCheck = ckE2fsckClean }

// ckE2fsckClean fails unless e2fsck -fn finds the volume clean.
func ckE2fsckClean(t *testing.T, p string) {
	if code, out := ckE2fsck(t, p); code != 0 {
		t.Fatalf("e2fsck -fn exit %d after random operations:\n%s", code, ckTrim(out))
	}
}

// TestCheckBadBlocksList: a volume mkfs.ext4 -l made with a bad-blocks
// list is clean under Check as under e2fsck (the listed blocks are in use,
// owned by inode 1), and a file sharing a listed block is found by both.
// Before, Check never claimed inode 1's blocks, so the shared block went
// unreported.
func TestCheckBadBlocksList(t *testing.T) {
	list := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(list, []byte("3000\n3001\n5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := ckMkfs(t, "16M", "", "-b", "1024", "-l", list)
	if code, out := ckE2fsck(t, img); code != 0 {
		t.Fatalf("e2fsck -fn exit %d on mkfs's image:\n%s", code, out)
	}
	if err := ckFile(t, img).Err(); err != nil {
		t.Fatalf("Check of a volume with a bad-blocks list: %v", err)
	}
	// The root directory's first block also listed bad.
	im := ckLoad(t, img)
	in := im.inode(disk.BadBlocksIno)
	binary.LittleEndian.PutUint32(in.Block[4:], uint32(im.firstExtent(disk.RootIno)))
	im.putInode(disk.BadBlocksIno, in)
	if err := os.WriteFile(img, im.b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := ckE2fsck(t, img); code&4 == 0 {
		t.Errorf("e2fsck -fn exit %d, want 4:\n%s", code, out)
	}
	if r := ckFile(t, img); r.Clean() {
		t.Error("Check found nothing")
	}
}
