package disk

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// Parser-level fuzz targets: every decoder accepts any bytes without
// panicking, and decode→encode gives the same bytes back.

func FuzzDirHash(f *testing.F) {
	f.Add([]byte("lost+found"), uint8(HashHalfMD4), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Add([]byte("日本語のファイル名"), uint8(HashTea), uint32(1), uint32(2), uint32(3), uint32(4))
	f.Add(bytes.Repeat([]byte{0xFF}, 255), uint8(HashLegacy), uint32(0x67452301), uint32(0), uint32(0), uint32(9))
	f.Add([]byte("a"), uint8(HashSiphash), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, name []byte, version uint8, s0, s1, s2, s3 uint32) {
		if len(name) == 0 {
			return // callers never hash empty names
		}
		seed := [4]uint32{s0, s1, s2, s3}
		major, minor, ok := DirHash(version, name, seed)
		if ok != (version <= HashTeaUnsigned) {
			t.Fatalf("version %d: ok = %v", version, ok)
		}
		if !ok {
			return
		}
		if major&1 != 0 {
			t.Fatalf("major hash %#x has bit 0 set (the collision bit)", major)
		}
		if major == 0x7fffffff<<1 {
			t.Fatalf("major hash is the EOF marker %#x", major)
		}
		if m2, n2, _ := DirHash(version, name, seed); m2 != major || n2 != minor {
			t.Fatal("hash is not deterministic")
		}
		// Signed and unsigned variants differ only on bytes ≥ 0x80.
		base := version % 3
		sm, sn, _ := DirHash(base, name, seed)
		um, un, _ := DirHash(base+3, name, seed)
		ascii := true
		for _, c := range name {
			if c >= 0x80 {
				ascii = false
				break
			}
		}
		if ascii && (sm != um || sn != un) {
			t.Fatalf("%q: signed %#x/%#x, unsigned %#x/%#x", name, sm, sn, um, un)
		}
	})
}

func FuzzDecodeSuperblock(f *testing.F) {
	sb := Superblock{Magic: Magic, DescSize: 64, LogBlockSize: 2, InodesCount: 1024,
		FeatureROCompat: ROCompatMetadataCsum, ChecksumType: ChecksumCRC32c}
	base := sb.Encode()
	// The input overwrites the start of a valid superblock: short inputs
	// keep minimization fast, and every field is still reachable.
	f.Add(base[:0x100])
	f.Add(base[:0x60])
	f.Add(bytes.Repeat([]byte{0xFF}, SuperblockSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := DecodeSuperblock(in[:min(len(in), SuperblockSize-1)]); err == nil {
			t.Fatal("short superblock decoded")
		}
		b := bytes.Clone(base)
		copy(b, in)
		got, err := DecodeSuperblock(b)
		if err != nil {
			t.Fatal(err)
		}
		_ = got.FeatureNames()
		_ = got.VolumeLabel()
		enc := got.Encode()
		n := SuperblockSize
		if got.FeatureROCompat&ROCompatMetadataCsum != 0 {
			n -= 4 // Encode recomputes s_checksum
			if SuperblockChecksum(enc) != binary.LittleEndian.Uint32(enc[n:]) {
				t.Fatal("Encode left a wrong checksum")
			}
		}
		if !bytes.Equal(enc[:n], b[:n]) {
			t.Fatal("decode→encode changed the superblock")
		}
	})
}

func FuzzDecodeGroupDesc(f *testing.F) {
	f.Add(make([]byte, GroupDescSize64), uint8(1))
	f.Add(bytes.Repeat([]byte{0xA5}, GroupDescSize64), uint8(0))
	f.Add(bytes.Repeat([]byte{0x5A}, 128), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, sizeSel uint8) {
		// 32 (no 64bit), 64, and the larger s_desc_size mkfs.ext4 -E
		// desc_size= makes, whose bytes past 64 EncodeInto must keep.
		size := []int{GroupDescSize32, GroupDescSize64, 128, 256}[sizeSel%4]
		if len(b) < size {
			return
		}
		gd := DecodeGroupDesc(b, size)
		out := bytes.Clone(b[:size])
		clear(out[:min(size, GroupDescSize64)])
		gd.EncodeInto(out, size)
		if !bytes.Equal(out, b[:size]) {
			t.Fatalf("decode→encode changed a %d-byte descriptor", size)
		}
		_ = GroupDescChecksum(1, 2, b[:size])
		_ = GroupDescChecksumCrc16([16]byte{}, 2, b[:size])
	})
}

func FuzzDecodeInode(f *testing.F) {
	in := Inode{Mode: ModeReg | 0o644, LinksCount: 1, ExtraIsize: InodeExtraSize, Flags: FlagExtents}
	slot := make([]byte, 256)
	in.EncodeInto(slot)
	f.Add(slot)
	f.Add(slot[:128])
	odd := bytes.Clone(slot)
	binary.LittleEndian.PutUint16(odd[0x80:], 3)
	f.Add(odd)
	f.Fuzz(func(t *testing.T, b []byte) {
		// Slots are the volume's inode size: 128 or a larger power of two.
		switch {
		case len(b) >= 512:
			b = b[:512]
		case len(b) >= 256:
			b = b[:256]
		case len(b) >= GoodOldInodeSize:
			b = b[:GoodOldInodeSize]
		default:
			return
		}
		d := DecodeInode(b)
		_ = d.Blocks(4096)
		_ = d.Size()
		out := bytes.Clone(b)
		d.EncodeInto(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("decode→encode changed the inode (i_extra_isize %d)", d.ExtraIsize)
		}
		SetInodeChecksum(7, 12, out)
		if !VerifyInodeChecksum(7, 12, out) {
			t.Fatal("checksum just set does not verify")
		}
	})
}

func FuzzDecodeExtent(f *testing.F) {
	b := make([]byte, 36)
	ExtentHeader{Magic: ExtentMagic, Entries: 1, Max: 4}.EncodeInto(b)
	Extent{Block: 7, Len: 100, Start: 1 << 33, Uninit: true}.EncodeInto(b[12:])
	ExtentIdx{Block: 9, Leaf: 1<<40 + 5}.EncodeInto(b[24:])
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 36 {
			return
		}
		out := make([]byte, 36)
		DecodeExtentHeader(b).EncodeInto(out)
		e := DecodeExtent(b[12:])
		if e.Uninit && e.Len == 0 {
			t.Fatal("unwritten extent of length 0")
		}
		e.EncodeInto(out[12:])
		DecodeExtentIdx(b[24:]).EncodeInto(out[24:])
		copy(out[34:36], b[34:36]) // ei_unused is not kept
		if !bytes.Equal(out, b[:36]) {
			t.Fatalf("decode→encode: %x, want %x", out, b[:36])
		}
	})
}

func FuzzDecodeDirent(f *testing.F) {
	b := make([]byte, 64)
	PutDirent(b, 12, 64, FtReg, "hello")
	f.Add(b, uint8(0))
	f.Add(b, uint8(4))
	f.Fuzz(func(t *testing.T, b []byte, shift uint8) {
		if len(b) < DirentHeaderSize {
			return
		}
		bs := 1024 << (shift % 7) // 1 KiB … 64 KiB
		de := DecodeDirent(b)
		rl := DecodeRecLen(de.RecLen, bs)
		// Values past the block are the caller's to refuse; below 64 KiB
		// blocks the field is the length itself.
		if rl < 0 || bs < 65536 && rl != int(de.RecLen) {
			t.Fatalf("rec_len %#x decodes to %d with %d-byte blocks", de.RecLen, rl, bs)
		}
		if rl%4 == 0 && rl > 0 && rl < bs {
			if got := DecodeRecLen(EncodeRecLen(rl, bs), bs); got != rl {
				t.Fatalf("rec_len %d round-trips to %d (block %d)", rl, got, bs)
			}
		}
		// An entry that fits re-encodes to the same header and name.
		n := int(de.NameLen)
		need := DirentRecLen(n)
		if len(b) < need || int(de.RecLen) < need {
			return
		}
		name := string(b[DirentHeaderSize : DirentHeaderSize+n])
		out := make([]byte, need)
		PutDirent(out, de.Inode, int(de.RecLen), de.FileType, name)
		if DecodeDirent(out) != de || string(out[DirentHeaderSize:DirentHeaderSize+n]) != name {
			t.Fatal("dirent round trip differs")
		}
		if len(b) >= DirTailSize {
			_ = HasDirTail(b)
			_ = DirBlockChecksum(1, b)
		}
	})
}

func FuzzDecodeXattrEntry(f *testing.F) {
	b := make([]byte, 32)
	XattrEntry{NameLen: 4, NameIndex: XattrIndexUser, ValueOffs: 100, ValueSize: 3, Hash: 42}.EncodeInto(b)
	copy(b[16:], "test")
	f.Add(b, "trusted.overlay.opaque", []byte("y"))
	f.Add(b, "system.posix_acl_access", []byte{})
	f.Fuzz(func(t *testing.T, b []byte, name string, value []byte) {
		if len(b) >= XattrEntryLen {
			out := make([]byte, XattrEntryLen)
			DecodeXattrEntry(b).EncodeInto(out)
			if !bytes.Equal(out, b[:XattrEntryLen]) {
				t.Fatal("xattr entry round trip differs")
			}
		}
		if idx, suffix, ok := XattrSplitName(name); ok {
			back, ok := XattrJoinName(idx, suffix)
			if !ok || back != name {
				t.Fatalf("%q splits to (%d, %q) and joins to %q", name, idx, suffix, back)
			}
		}
		h := XattrEntryHash([]byte(name), value)
		_ = XattrBlockHash([]uint32{h, 1})
		if XattrValueSize(len(value))%XattrPad != 0 || XattrValueSize(len(value)) < len(value) {
			t.Fatal("value size not padded")
		}
	})
}

func FuzzDxRoot(f *testing.F) {
	b := make([]byte, 1024)
	DxRootInfo{HashVersion: HashHalfMD4, InfoLength: DxRootInfoLen}.EncodeInto(b)
	PutDxEntries(b, DxRootEntries, DxLimit(1024, DxRootEntries, true), []DxEntry{{0, 1}, {0x100, 2}})
	PutDxTail(b, DxRootEntries, 5)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < DxRootEntries+DxEntrySize {
			return
		}
		info := DecodeDxRootInfo(b)
		out := bytes.Clone(b)
		info.EncodeInto(out)
		if !bytes.Equal(out, b) {
			t.Fatal("dx_root_info round trip differs")
		}
		count, limit := DxCountLimit(b, DxRootEntries)
		// The checker's bounds: count ≤ limit and the tail inside the block.
		if count > limit || DxRootEntries+limit*DxEntrySize+DxTailSize > len(b) || count == 0 {
			return
		}
		for i := 0; i < count; i++ {
			_ = DxEntryAt(b, DxRootEntries, i)
		}
		if StoredDxChecksum(b, DxRootEntries, limit) != DxChecksum(5, b, DxRootEntries, count, limit) {
			PutDxTail(out, DxRootEntries, 5)
			if StoredDxChecksum(out, DxRootEntries, limit) != DxChecksum(5, out, DxRootEntries, count, limit) {
				t.Fatal("dx tail just written does not verify")
			}
		}
	})
}
