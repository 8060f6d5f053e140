package disk

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

type record interface {
	Marshal([]byte)
	Unmarshal([]byte)
}

// TestRecordSizes asserts every on-disk record's size, and that the hand
// written encoders lay fields out exactly in declaration order (what
// encoding/binary does), so offsets cannot drift from the struct.
func TestRecordSizes(t *testing.T) {
	for _, tc := range []struct {
		rec  record
		size int
	}{
		{&Super{}, SuperSize},
		{&InodeCompact{}, InodeCompactSize},
		{&InodeExtended{}, InodeExtendedSize},
		{&Dirent{}, DirentSize},
		{&XattrIbodyHeader{}, XattrIbodyHeaderSize},
		{&XattrEntry{}, XattrEntrySize},
	} {
		name := reflect.TypeOf(tc.rec).Elem().Name()
		if got := binary.Size(tc.rec); got != tc.size {
			t.Errorf("%s: binary.Size = %d, want %d", name, got, tc.size)
			continue
		}
		rng := rand.New(rand.NewPCG(1, 2))
		raw := make([]byte, tc.size)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		tc.rec.Unmarshal(raw)
		var want bytes.Buffer
		if err := binary.Write(&want, binary.LittleEndian, tc.rec); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), raw) {
			t.Errorf("%s: Unmarshal disagrees with declaration order", name)
		}
		got := make([]byte, tc.size)
		tc.rec.Marshal(got)
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: Marshal(Unmarshal(b)) != b", name)
		}
	}
}

func TestDevEncoding(t *testing.T) {
	for _, d := range [][2]uint32{{0, 0}, {1, 3}, {8, 1}, {259, 65537}, {4095, 1<<20 - 1}} {
		ma, mi := DecodeDev(EncodeDev(d[0], d[1]))
		if ma != d[0] || mi != d[1] {
			t.Errorf("dev %d:%d → %d:%d", d[0], d[1], ma, mi)
		}
	}
	if got := EncodeDev(8, 1); got != 0x801 {
		t.Errorf("EncodeDev(8,1) = %#x, want 0x801 (the kernel's new_encode_dev)", got)
	}
}

func TestXattrIbodySize(t *testing.T) {
	if XattrIbodySize(0) != 0 || XattrIbodySize(1) != 12 || XattrIbodySize(3) != 20 {
		t.Fatal("XattrIbodySize disagrees with erofs_xattr_ibody_size")
	}
}
