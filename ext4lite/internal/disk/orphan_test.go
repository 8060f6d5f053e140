package disk

import (
	"encoding/binary"
	"testing"
)

// TestOrphanBlockChecksumKnown checks the checksum against blocks real
// tools wrote to a 1 KiB-block volume made by mke2fs 1.47.0 (-O
// orphan_file,metadata_csum_seed; s_checksum_seed 0x6872fc93, orphan file
// inode 12 of generation 0 at blocks 4385-4416): an empty block as mke2fs
// wrote it, and block 13 after the kernel put inodes 13 and 14 into it
// (two files unlinked while open, copied under fsfreeze).
func TestOrphanBlockChecksumKnown(t *testing.T) {
	seed := InodeSeed(0x6872fc93, 12, 0)
	for _, tc := range []struct {
		name    string
		blk     uint64
		entries []uint32
		sum     uint32
	}{
		{"mke2fs empty block 0", 4385, nil, 0x9445da0a},
		{"kernel block 13 with inodes 13, 14", 4398, []uint32{13, 14}, 0x5ca19104},
	} {
		b := make([]byte, 1024)
		for i, e := range tc.entries {
			binary.LittleEndian.PutUint32(b[4*i:], e)
		}
		binary.LittleEndian.PutUint32(b[1016:], OrphanBlockMagic)
		binary.LittleEndian.PutUint32(b[1020:], tc.sum)
		ob, err := DecodeOrphanBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		if p := ob.Valid(true, seed, tc.blk); p != "" {
			t.Errorf("%s: %s", tc.name, p)
		}
		if ob.Len() != 254 || ob.Entry(0) != append(tc.entries, 0)[0] {
			t.Errorf("%s: %d entries, first %d", tc.name, ob.Len(), ob.Entry(0))
		}
		// The block number is in the sum: the same bytes one block on are bad.
		if p := ob.Valid(true, seed, tc.blk+1); p == "" {
			t.Errorf("%s: checksum does not cover the block number", tc.name)
		}
		if p := ob.Valid(false, seed, tc.blk+1); p != "" {
			t.Errorf("%s without metadata_csum: %s", tc.name, p)
		}
		ob.SetChecksum(seed, tc.blk)
		if got := binary.LittleEndian.Uint32(b[1020:]); got != tc.sum {
			t.Errorf("%s: SetChecksum wrote %#x, want %#x", tc.name, got, tc.sum)
		}
	}
}

func TestOrphanBlockBadInput(t *testing.T) {
	for _, n := range []int{0, 8, 1020, 1026} {
		if _, err := DecodeOrphanBlock(make([]byte, n)); err == nil {
			t.Errorf("%d bytes: no error", n)
		}
	}
	ob, err := DecodeOrphanBlock(make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if ob.Len() != 1022 {
		t.Errorf("4 KiB block: %d entries, want 1022", ob.Len())
	}
	if p := ob.Valid(false, 0, 0); p == "" {
		t.Error("zero magic accepted")
	}
}

func FuzzDecodeOrphanBlock(f *testing.F) {
	f.Add(make([]byte, 1024), uint64(4385))
	f.Fuzz(func(t *testing.T, b []byte, blk uint64) {
		ob, err := DecodeOrphanBlock(b)
		if err != nil {
			return
		}
		for i := 0; i < ob.Len(); i++ {
			_ = ob.Entry(i)
		}
		ob.SetChecksum(7, blk)
		if p := ob.Valid(true, 7, blk); p != "" && ob.Magic == OrphanBlockMagic {
			t.Fatalf("after SetChecksum: %s", p)
		}
	})
}
