package jbd2

import (
	"bytes"
	"os"
	"testing"
)

func TestFormatEqualsMkfsFixture(t *testing.T) {
	want, err := os.ReadFile("internal/disk/testdata/mkfs-sb.bin")
	if err != nil {
		t.Fatal(err)
	}
	var uuid [16]byte
	copy(uuid[:], want[0x30:])
	dev := NewMemDevice(4096, 1024)
	if err := Format(dev, 4096, 1024, FormatOptions{UUID: uuid}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dev.Blocks[0][:1024], want) {
		t.Fatalf("superblock differs from mkfs.ext4's:\n got %x\nwant %x", dev.Blocks[0][:128], want[:128])
	}
	if dev.Flushes != 1 {
		t.Errorf("Format flushed %d times", dev.Flushes)
	}
}

func TestFormatRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		bs   int
		n    uint32
		f    Features
	}{
		{"small block", 512, 1024, Features{}},
		{"odd block", 3072, 1024, Features{}},
		{"short", 4096, MinBlocks - 1, Features{}},
		{"fast commit", 4096, 1024, Features{Incompat: IncompatFastCommit}},
		{"v2 and v3", 4096, 1024, Features{Incompat: IncompatCsumV2 | IncompatCsumV3}},
	} {
		if err := Format(NewMemDevice(c.bs, c.n), c.bs, c.n, FormatOptions{Features: c.f}); err == nil {
			t.Errorf("%s: Format accepted", c.name)
		}
	}
}
