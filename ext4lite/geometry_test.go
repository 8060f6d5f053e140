package ext4lite

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
)

// TestGeometryOneDecoder: the reader (Open) and Check take the layout from
// one decoder (disk.Superblock.Geometry), so for every impossible or
// unsupported superblock they refuse alike: the same class of error
// (ErrCorrupt or ErrUnsupported), where before only Check bounded the
// block and group counts and the inode table's fit.
func TestGeometryOneDecoder(t *testing.T) {
	_, base := newVolume(t, 8<<20)
	for _, tc := range []struct {
		name        string
		patch       func(sb []byte)
		unsupported bool
	}{
		{"block size 2^7 KiB", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x18:], 7) }, false},
		{"bigalloc cluster size", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x1C:], 4) }, true},
		{"0 inodes per group", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x28:], 0) }, false},
		{"blocks per group not a multiple of 8", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x20:], 8191) }, false},
		{"2^49 blocks", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x150:], 1<<17) }, false},
		{"2^29 groups", func(sb []byte) { binary.LittleEndian.PutUint32(sb[0x150:], 1<<12) }, true},
		{"inode table larger than a group", func(sb []byte) {
			binary.LittleEndian.PutUint32(sb[0x20:], 64)   // blocks per group
			binary.LittleEndian.PutUint32(sb[0x24:], 64)   // clusters per group
			binary.LittleEndian.PutUint32(sb[0x28:], 1024) // inodes per group
		}, false},
		{"desc_size 48", func(sb []byte) { binary.LittleEndian.PutUint16(sb[0xFE:], 48) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := ckLoad(t, base)
			if im.sb.FeatureIncompat&disk.Incompat64bit == 0 && tc.name == "desc_size 48" {
				t.Skip("32-bit volume")
			}
			raw := im.b[disk.SuperblockOffset : disk.SuperblockOffset+disk.SuperblockSize]
			tc.patch(raw)
			im.fixSuper()
			p := t.TempDir() + "/v.ext4"
			if err := os.WriteFile(p, im.b, 0o644); err != nil {
				t.Fatal(err)
			}
			want := ErrCorrupt
			if tc.unsupported {
				want = ErrUnsupported
			}
			v, err := Open(p, &Options{ReadOnly: true})
			if err == nil {
				v.Close()
			}
			if !errors.Is(err, want) {
				t.Errorf("Open: %v, want %v", err, want)
			}
			_, cerr := Check(memDevice(im.b), nil)
			if !errors.Is(cerr, want) {
				t.Errorf("Check: %v, want %v", cerr, want)
			}
		})
	}
}
