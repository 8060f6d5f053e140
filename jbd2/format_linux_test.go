package jbd2

import (
	"bytes"
	"testing"
)

// TestFormatMatchesMkfs overwrites the journal mkfs.ext4 made with ours and
// requires the very same bytes, a clean e2fsck and the same dumpe2fs fields.
func TestFormatMatchesMkfs(t *testing.T) {
	img := mkfsImage(t)
	dev := openImageDevice(t, img)
	orig := make([]byte, dev.bs)
	if err := dev.ReadBlock(0, orig); err != nil {
		t.Fatal(err)
	}
	before := dumpJournalFields(t, img)

	zeroJournal(t, dev)
	uuid := fsUUID(t, img)
	if err := Format(dev, dev.bs, uint32(len(dev.blocks)), FormatOptions{UUID: uuid}); err != nil {
		t.Fatal(err)
	}
	ours := make([]byte, dev.bs)
	if err := dev.ReadBlock(0, ours); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, orig) {
		for i := range ours {
			if ours[i] != orig[i] {
				t.Errorf("byte %#x: ours %#02x, mkfs.ext4 %#02x", i, ours[i], orig[i])
			}
		}
		t.Fatal("journal superblock differs from mkfs.ext4's")
	}
	// mkfs.ext4 stores the filesystem UUID in s_uuid of internal journals too.
	if !bytes.Equal(orig[0x30:0x40], uuid[:]) {
		t.Errorf("mkfs.ext4's s_uuid %x is not the filesystem UUID %x", orig[0x30:0x40], uuid)
	}
	e2fsckClean(t, img)
	if after := dumpJournalFields(t, img); after != before {
		t.Fatalf("dumpe2fs journal fields changed:\nmkfs:\n%s\nours:\n%s", before, after)
	}
}

// TestFormatKernelFeatures formats with the features Linux sets at mount and
// checks e2fsck accepts the checksummed superblock and dumpe2fs reads them.
func TestFormatKernelFeatures(t *testing.T) {
	img := mkfsImage(t)
	dev := openImageDevice(t, img)
	zeroJournal(t, dev)
	if err := Format(dev, dev.bs, uint32(len(dev.blocks)), FormatOptions{UUID: fsUUID(t, img), Features: KernelFeatures}); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, img)
	got := dumpJournalFields(t, img)
	for _, want := range []string{"journal_64bit journal_checksum_v3", "Journal checksum type:    crc32c"} {
		if !bytes.Contains([]byte(got), []byte(want)) {
			t.Errorf("dumpe2fs lacks %q:\n%s", want, got)
		}
	}
}
