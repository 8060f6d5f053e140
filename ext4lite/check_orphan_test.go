package ext4lite

import (
	"encoding/binary"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// ckOrphanBlocks is the orphan file's physical blocks, in logical order
// (its tree is in the inode: mke2fs makes it one extent or a few).
func ckOrphanBlocks(t testing.TB, im *ckImage) []uint64 {
	t.Helper()
	in := im.inode(im.sb.OrphanFileInum)
	h := disk.DecodeExtentHeader(in.Block[:])
	if h.Magic != disk.ExtentMagic || h.Depth != 0 {
		t.Fatalf("orphan file inode %d: extent header %+v, want an in-inode leaf", im.sb.OrphanFileInum, h)
	}
	var out []uint64
	for i := 0; i < int(h.Entries); i++ {
		e := disk.DecodeExtent(in.Block[12+12*i:])
		for j := uint64(0); j < uint64(e.Len); j++ {
			out = append(out, e.Start+j)
		}
	}
	if uint64(len(out))*uint64(im.bs) != in.Size() {
		t.Fatalf("orphan file maps %d blocks, i_size %d", len(out), in.Size())
	}
	return out
}

// putOrphanEntries writes entries into logical block i of the orphan file
// and recomputes its checksum.
func (im *ckImage) putOrphanEntries(t testing.TB, i int, entries ...uint32) {
	blk := ckOrphanBlocks(t, im)[i]
	b := im.block(blk)
	for j, e := range entries {
		binary.LittleEndian.PutUint32(b[4*j:], e)
	}
	ob, err := disk.DecodeOrphanBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	ino := im.sb.OrphanFileInum
	ob.SetChecksum(disk.InodeSeed(im.seed(), ino, im.inode(ino).Generation), blk)
}

// setROCompat sets (or with set false clears) ro_compat feature f.
func (im *ckImage) setROCompat(f disk.ROCompat, set bool) {
	raw := im.b[disk.SuperblockOffset:]
	v := disk.ROCompat(binary.LittleEndian.Uint32(raw[0x64:]))
	if set {
		v |= f
	} else {
		v &^= f
	}
	binary.LittleEndian.PutUint32(raw[0x64:], uint32(v))
	im.fixSuper()
}

// ckOrphanSeed is the fuzz seed image with an orphan file (mke2fs 1.47.0
// -O orphan_file,metadata_csum_seed, 1 KiB blocks), so these tests need
// no mke2fs.
func ckOrphanSeed(t testing.TB) *ckImage {
	t.Helper()
	b, err := readGzip(filepath.Join("testdata", "seed-mkfs-1k-orphanfile.img.gz"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := ckParse(b)
	if err != nil {
		t.Fatal(err)
	}
	if im.sb.FeatureCompat&disk.CompatOrphanFile == 0 {
		t.Fatal("seed-mkfs-1k-orphanfile has no orphan file")
	}
	return im
}

// ckRegularFile finds a regular file with data in the root directory.
func (im *ckImage) ckRegularFile(t testing.TB) uint32 {
	t.Helper()
	for ino := im.sb.FirstIno; ino <= im.sb.InodesCount; ino++ {
		in := im.inode(ino)
		if in.Mode&disk.ModeTypeMask == disk.ModeReg && in.LinksCount > 0 && in.Size() > 0 && ino != im.sb.OrphanFileInum {
			return ino
		}
	}
	t.Fatal("no regular file")
	return 0
}

// TestCheckOrphanFileAllowOrphans: an inode in the orphan file that
// still has links (the kernel puts a file being truncated there) is an
// orphan: reported at rest, accepted with AllowOrphans, as the chain's.
func TestCheckOrphanFileAllowOrphans(t *testing.T) {
	im := ckOrphanSeed(t)
	if r, err := Check(memDevice(im.b), nil); err != nil || !r.Clean() {
		t.Fatalf("seed: %v %v", r.Err(), err)
	}
	f := im.ckRegularFile(t)
	im.putOrphanEntries(t, 7, 0, f)
	im.setROCompat(disk.ROCompatOrphanPresent, true)
	r, err := Check(memDevice(im.b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 1 || !strings.Contains(r.Err().Error(), "1 inode(s) in the orphan file (unlinked while open") {
		t.Errorf("at rest: %v, want exactly the orphan finding", r.Err())
	}
	r, err = Check(memDevice(im.b), &CheckOptions{AllowOrphans: true})
	if err != nil || !r.Clean() {
		t.Errorf("AllowOrphans: %v %v", r.Err(), err)
	}
}

// TestCheckOrphanFileBounded: a hostile orphan file costs work bounded by
// the volume: an i_size of 2^40 blocks, an extent tree that loops, every
// slot of every block filled with free inodes (findings are capped).
func TestCheckOrphanFileBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, im *ckImage)
		want string
	}{
		{"huge size", func(t *testing.T, im *ckImage) {
			ino := im.sb.OrphanFileInum
			in := im.inode(ino)
			in.SetSize(uint64(im.bs) << 40)
			im.putInode(ino, in)
		}, "hole at block 32 of 1099511627776"},
		{"extent loop", func(t *testing.T, im *ckImage) {
			// The in-inode leaf becomes an index whose node points at itself.
			ino := im.sb.OrphanFileInum
			in := im.inode(ino)
			blk := ckOrphanBlocks(t, im)[0]
			h := disk.DecodeExtentHeader(in.Block[:])
			h.Depth, h.Entries = 1, 1
			h.EncodeInto(in.Block[:])
			disk.ExtentIdx{Block: 0, Leaf: blk}.EncodeInto(in.Block[12:])
			im.putInode(ino, in)
			b := im.block(blk)
			disk.ExtentHeader{Magic: disk.ExtentMagic, Entries: 1, Max: uint16((im.bs - 12) / 12), Depth: 1}.EncodeInto(b)
			disk.ExtentIdx{Block: 0, Leaf: blk}.EncodeInto(b[12:])
		}, "extent tree block"},
		{"every slot a free inode", func(t *testing.T, im *ckImage) {
			free := make([]uint32, disk.OrphanEntriesPerBlock(im.bs))
			for i := range free {
				free[i] = im.sb.InodesCount - uint32(i%50)
			}
			for i := range ckOrphanBlocks(t, im) {
				im.putOrphanEntries(t, i, free...)
			}
			im.setROCompat(disk.ROCompatOrphanPresent, true)
		}, "is a free inode"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			im := ckOrphanSeed(t)
			tc.fn(t, im)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			r, err := Check(memDevice(im.b), &CheckOptions{MaxFindings: 20})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.Err())
			if r.Clean() || !strings.Contains(r.Err().Error(), tc.want) {
				t.Errorf("Check: %v; want a finding with %q", r.Err(), tc.want)
			}
			if len(r.Findings) > 20 {
				t.Errorf("%d findings past MaxFindings", len(r.Findings))
			}
			// The volume is 3 MiB; the check allocates a few times that.
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
				t.Errorf("Check allocated %d MiB", n>>20)
			}
		})
	}
}
