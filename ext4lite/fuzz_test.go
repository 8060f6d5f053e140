package ext4lite

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/jbd2"
	"z.gfire.dev/gvx/sink"
)

// Seed images for FuzzOpen live gzip-compressed in testdata/; regenerate
// them with GVX_REGEN_SEEDS=1 go test -run TestFuzzSeedRegen (Linux, with
// mkfs.ext4 and e2fsck; as root for the device nodes), or only one of
// them with GVX_REGEN_SEEDS=NAME. mkfs-1k-desc128 has 128-byte group
// descriptors (-O 64bit -E desc_size=128), which writes once panicked on.
// mkfs-1k-orphanfile has an orphan file (-O orphan_file,metadata_csum_seed,
// as e2fsprogs ≥ 1.47 makes by default) and so a journal, which the
// feature requires.
var fuzzSeedNames = []string{"ext4lite-1k", "ext4lite-4k", "mkfs-1k", "mkfs-4k", "mkfs-1k-desc128", "mkfs-1k-orphanfile"}

// fuzzSmallTree is the content of every seed image (ext4test.SeedTree,
// which the top-level fuzz harnesses seed from too).
func fuzzSmallTree(s sink.Sink, bs int) error { return ext4test.SeedTree(s, bs) }

// fuzzSeed is one decompressed seed image and its metadata ranges.
type fuzzSeed struct {
	name   string
	img    []byte
	ranges []ckRange
}

var (
	fuzzSeedsOnce sync.Once
	fuzzSeeds     []*fuzzSeed
	fuzzSeedsErr  error
)

func loadFuzzSeeds(t testing.TB) []*fuzzSeed {
	fuzzSeedsOnce.Do(func() {
		for _, n := range fuzzSeedNames {
			b, err := readGzip(filepath.Join("testdata", "seed-"+n+".img.gz"))
			if err != nil {
				fuzzSeedsErr = err
				return
			}
			im, err := ckParse(b)
			if err != nil {
				fuzzSeedsErr = fmt.Errorf("%s: %w", n, err)
				return
			}
			rs, err := ckMetadataRanges(im)
			if err != nil {
				fuzzSeedsErr = fmt.Errorf("%s: %w", n, err)
				return
			}
			fuzzSeeds = append(fuzzSeeds, &fuzzSeed{n, b, rs})
		}
	})
	if fuzzSeedsErr != nil {
		t.Fatal(fuzzSeedsErr)
	}
	return fuzzSeeds
}

func readGzip(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(z, 16<<20))
}

// TestFuzzSeedImages checks the seed images are clean (under Check and,
// when regenerated, e2fsck) and regenerates them on request.
func TestFuzzSeedImages(t *testing.T) {
	for _, s := range loadFuzzSeeds(t) {
		r, err := Check(memDevice(bytes.Clone(s.img)), nil)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := r.Err(); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		if len(s.ranges) < 10 {
			t.Errorf("%s: only %d metadata ranges", s.name, len(s.ranges))
		}
	}
}

// FuzzOpen mutates metadata bytes of small real images (made by ext4lite
// and by mkfs.ext4), opens them on an in-memory device, walks the whole
// tree (Lstat, ReadDir, Readlink, reads), runs Check, then writes to the
// volume. Any panic fails; every error must wrap one of the package's
// sentinels or a documented errno. Two cross-properties tie the reader,
// the writer and the checker together: a volume Check calls clean must
// read without ErrCorrupt, and must still be clean after ext4lite wrote
// to it.
//
// The input is a patch script: byte 0 picks the seed image, then records
// of [range, offset lo, offset hi, n, n bytes] overwrite bytes inside one
// metadata range (superblock, descriptors, bitmaps, inode table,
// directory, extent and xattr blocks) or, for range 255, anywhere.
func FuzzOpen(f *testing.F) {
	seeds := loadFuzzSeeds(f)
	for i := range seeds {
		f.Add([]byte{byte(i)})
		f.Add([]byte{byte(i), 0, 0x38, 0, 2, 0x53, 0xEF})       // superblock magic rewritten
		f.Add([]byte{byte(i), 1, 0x0C, 0, 2, 0xFF, 0xFF})       // descriptor free count
		f.Add([]byte{byte(i), 4, 0x40, 0, 4, 0xFF, 0, 0xFF, 0}) // inode table bytes
		f.Add([]byte{byte(i), 6, 0x00, 0, 1, 0x0A})             // first directory block
		f.Add([]byte{byte(i), 255, 0x00, 0x04, 4, 1, 2, 3, 4})  // anywhere
		for r, rg := range seeds[i].ranges {
			if rg.what == "orphan file block 0" && r < 255 {
				f.Add([]byte{byte(i), byte(r), 0, 0, 4, 11, 0, 0, 0})                  // entry 0: lost+found
				f.Add([]byte{byte(i), byte(r), 0xF8, 0x03, 4, 0x04, 0xCA, 0x10, 0x0B}) // the tail's magic, again
			}
		}
	}
	f.Fuzz(func(t *testing.T, script []byte) { fuzzOne(t, seeds, script) })
}

// fuzzOne applies one patch script to its seed image and runs fuzzVolume.
func fuzzOne(t *testing.T, seeds []*fuzzSeed, script []byte) {
	if len(script) == 0 {
		return
	}
	s := seeds[int(script[0])%len(seeds)]
	img := bytes.Clone(s.img)
	for p := 1; p+4 <= len(script); {
		r, off, n := script[p], int(binary.LittleEndian.Uint16(script[p+1:])), int(script[p+3]%16)
		p += 4
		n = min(n, len(script)-p)
		var base, size int
		if r == 255 {
			base, size = 0, len(img)
		} else {
			rg := s.ranges[int(r)%len(s.ranges)]
			base, size = rg.off, rg.n
		}
		for i := 0; i < n; i++ {
			img[base+(off+i)%size] = script[p+i]
		}
		p += n
	}
	fuzzVolume(t, img)
}

// fuzzVolume runs the read, check and write phases on one image.
func fuzzVolume(t *testing.T, img []byte) {
	r, err := Check(memDevice(bytes.Clone(img)), &CheckOptions{MaxFindings: 20})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrNotExt4) {
			t.Fatalf("Check: unexpected error %v", err)
		}
	}
	clean := err == nil && r.Clean()

	v, err := OpenDevice(memDevice(bytes.Clone(img)), &Options{ReadOnly: true})
	if err != nil {
		fuzzErr(t, "OpenDevice", err, clean)
	} else {
		fuzzWalk(t, v, clean)
		v.Close()
	}

	// Write phase: ext4lite writes into the (maybe corrupt) volume; on a
	// clean one the result must stay clean.
	dev := memDevice(bytes.Clone(img))
	w, err := OpenDevice(dev, nil)
	if err != nil {
		fuzzErr(t, "OpenDevice (read-write)", err, clean)
		return
	}
	werr := fuzzWrite(w)
	if werr != nil {
		fuzzErr(t, "write", werr, clean)
	}
	if err := w.Close(); err != nil {
		fuzzErr(t, "Close", err, clean)
		return
	}
	if clean && werr == nil {
		r, err := Check(dev, nil)
		if err != nil {
			t.Fatalf("Check after writing to a clean volume: %v", err)
		}
		if err := r.Err(); err != nil {
			t.Fatalf("a clean volume is corrupt after ext4lite wrote to it: %v", err)
		}
	}
}

// fuzzErrOK lists what a corrupt volume may legitimately make ext4lite
// return.
// The jbd2 sentinels are here only while a damaged journal's error
// carries jbd2's sentinel without ext4lite's (TestCheckJournalErrorWraps).
var fuzzErrOK = []error{ErrCorrupt, ErrUnsupported, ErrNotExt4, ErrNoSpace, fs.ErrNotExist,
	sink.ErrSymlinkInPath, syscall.ENOTDIR, syscall.EISDIR, syscall.EINVAL, syscall.ENAMETOOLONG,
	syscall.ENOTEMPTY, syscall.EMLINK, syscall.ENODATA, syscall.EEXIST, syscall.EFBIG, jbd2.ErrCorrupt, jbd2.ErrUnsupported}

func fuzzErr(t *testing.T, op string, err error, clean bool) {
	t.Helper()
	if clean && (errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotExt4) || errors.Is(err, jbd2.ErrCorrupt)) {
		t.Fatalf("%s: Check found the volume clean, ext4lite says %v", op, err)
	}
	for _, e := range fuzzErrOK {
		if errors.Is(err, e) {
			return
		}
	}
	t.Fatalf("%s: error wraps no documented sentinel: %v (%T)", op, err, err)
}

// fuzzWalk reads every entry reachable from the root, bounded in entries,
// depth and bytes read (a corrupt directory may point at its ancestor).
func fuzzWalk(t *testing.T, v *FS, clean bool) {
	budget := 1000
	dirs := map[uint64]bool{}
	buf := make([]byte, 32<<10)
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		if budget <= 0 || depth > 16 {
			return
		}
		budget--
		h, err := v.Lstat(p)
		if err != nil {
			fuzzErr(t, "lstat "+p, err, clean)
			return
		}
		switch h.Type() {
		case sink.TypeDir:
			if dirs[h.Ino] {
				return
			}
			dirs[h.Ino] = true
			names, err := v.ReadDir(p)
			if err != nil {
				fuzzErr(t, "readdir "+p, err, clean)
				return
			}
			for _, n := range names {
				if p == "." {
					walk(n, depth+1)
				} else {
					walk(p+"/"+n, depth+1)
				}
			}
		case sink.TypeReg:
			rc, err := v.Open(p)
			if err != nil {
				fuzzErr(t, "open "+p, err, clean)
				return
			}
			_, err = io.CopyBuffer(io.Discard, io.LimitReader(rc, 1<<20), buf)
			rc.Close()
			if err != nil {
				fuzzErr(t, "read "+p, err, clean)
			}
		case sink.TypeSymlink:
			if _, err := v.Readlink(p); err != nil {
				fuzzErr(t, "readlink "+p, err, clean)
			}
		}
	}
	walk(".", 0)
}

// fuzzWrite changes the volume the way a layer apply does.
func fuzzWrite(v *FS) error {
	if err := v.Mkdir(&sink.Header{Path: "fuzz-new", Mode: sink.TypeDir | 0o755}); err != nil {
		return err
	}
	data := strings.Repeat("w", 5000)
	if err := v.WriteFile(&sink.Header{Path: "fuzz-new/f", Mode: sink.TypeReg | 0o644, Size: int64(len(data)),
		Xattrs: map[string][]byte{"user.k": []byte("v")}}, strings.NewReader(data)); err != nil {
		return err
	}
	if err := v.Link("fuzz-new/f", "fuzz-new/g"); err != nil {
		return err
	}
	names, err := v.ReadDir(".")
	if err != nil {
		return err
	}
	for _, n := range names {
		if n != "lost+found" && n != "fuzz-new" {
			return v.RemoveAll(n)
		}
	}
	return nil
}

// ckParse wraps an image's bytes for the corruption helpers.
func ckParse(b []byte) (*ckImage, error) {
	if len(b) < 2*disk.SuperblockOffset {
		return nil, fmt.Errorf("image of %d bytes", len(b))
	}
	sb, err := disk.DecodeSuperblock(b[disk.SuperblockOffset:])
	if err != nil {
		return nil, err
	}
	return &ckImage{b: b, sb: sb, bs: sb.BlockSize()}, nil
}

type ckRange struct {
	what   string
	off, n int
}

// ckMetadataRanges lists the byte ranges of a (good) volume's metadata:
// the superblock, descriptors, bitmaps, the used inode table, directory,
// extent tree and xattr blocks. The first ones are, in order: superblock,
// descriptors, block bitmap 0, inode bitmap 0, inode table 0, (more
// groups), then the root directory's first block.
func ckMetadataRanges(im *ckImage) ([]ckRange, error) {
	groups := im.sb.InodesCount / im.sb.InodesPerGroup
	ds := int(im.sb.DescSize)
	if im.sb.FeatureIncompat&disk.Incompat64bit == 0 {
		ds = disk.GroupDescSize32
	}
	out := []ckRange{
		{"superblock", disk.SuperblockOffset, disk.SuperblockSize},
		{"descriptors", (int(im.sb.FirstDataBlock) + 1) * im.bs, ds * int(groups)},
	}
	for g := uint32(0); g < groups; g++ {
		gd := disk.DecodeGroupDesc(im.b[(int(im.sb.FirstDataBlock)+1)*im.bs+int(g)*ds:], ds)
		out = append(out, ckRange{fmt.Sprintf("g%d block bitmap", g), int(gd.BlockBitmap()) * im.bs, im.bs},
			ckRange{fmt.Sprintf("g%d inode bitmap", g), int(gd.InodeBitmap()) * im.bs, im.bs})
		if used := int(im.sb.InodesPerGroup - gd.ItableUnused()); used > 0 {
			out = append(out, ckRange{fmt.Sprintf("g%d inode table", g), int(gd.InodeTable()) * im.bs, used * int(im.sb.InodeSize)})
		}
	}
	// Directory, tree and xattr blocks of every in-use inode, read with
	// ext4lite itself (the volume is known good).
	v, err := OpenDevice(memDevice(bytes.Clone(im.b)), &Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer v.Close()
	inos := []uint32{disk.RootIno}
	if j := im.sb.JournalInum; im.sb.FeatureCompat&disk.CompatHasJournal != 0 && j != 0 {
		inos = append(inos, j)
	}
	for ino := im.sb.FirstIno; ino <= im.sb.InodesCount; ino++ {
		inos = append(inos, ino)
	}
	for _, ino := range inos {
		cin, err := v.getInode(ino)
		if err != nil {
			return nil, err
		}
		if cin.d.LinksCount == 0 {
			continue
		}
		if blk := cin.d.FileACL(); blk != 0 {
			out = append(out, ckRange{fmt.Sprintf("xattr block of %d", ino), int(blk) * im.bs, im.bs})
		}
		if !usesBlockData(cin) || cin.d.Flags&disk.FlagExtents == 0 {
			continue
		}
		m, err := v.loadExtents(cin)
		if err != nil {
			return nil, err
		}
		for _, b := range m.tree {
			out = append(out, ckRange{fmt.Sprintf("extent block of %d", ino), int(b) * im.bs, im.bs})
		}
		if ino == im.sb.OrphanFileInum && im.sb.FeatureCompat&disk.CompatOrphanFile != 0 && len(m.ext) > 0 {
			out = append(out, ckRange{"orphan file block 0", int(m.ext[0].Start) * im.bs, im.bs})
		}
		if ino == im.sb.JournalInum && len(m.ext) > 0 {
			// The jbd2 superblock (its first 1 KiB holds every field).
			out = append(out, ckRange{"journal superblock", int(m.ext[0].Start) * im.bs, 1024})
		}
		if cin.isDir() {
			for _, e := range m.ext {
				for i := 0; i < int(e.Len); i++ {
					out = append(out, ckRange{fmt.Sprintf("dir block of %d", ino), int(e.Start+uint64(i)) * im.bs, im.bs})
				}
			}
		}
	}
	return out, nil
}
