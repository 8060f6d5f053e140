package ext4lite

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TestWriteFreshZeroesReusedBlocks: file data written into freshly
// allocated blocks (writeFresh: whole blocks straight from the caller's
// buffer, a partial head or tail block through the scratch buffer) reads
// back exactly, and the rest of each block in the volume file is zeros even
// where the block last held another file's data (0xAA here).
func TestWriteFreshZeroesReusedBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vol.ext4")
	uuid := [16]byte{0x77, 0x66}
	v, err := Create(p, 64<<20, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	// Garbage in all but 1 MiB of the free space: the files below cannot
	// fit after it and must reuse its blocks.
	st := v.StatFS()
	garbage := bytes.Repeat([]byte{0xAA}, int(st.FreeBlocks)*st.BlockSize-1<<20)
	if err := v.WriteFile(&sink.Header{Path: "garbage", Mode: sink.TypeReg | 0o644, Size: int64(len(garbage))}, bytes.NewReader(garbage)); err != nil {
		t.Fatal(err)
	}
	old, err := v.FileExtents(mustLookup(t, v, "garbage"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Remove("garbage"); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil { // the freed blocks become allocatable
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{65535, 4097, 4096, 4095, 1, 65536, 65537, 1<<20 + 5, 3<<20 + 100} // small after larger: the scratch buffer holds old bytes
	want := map[string][]byte{}
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.IntN(255) + 1) // never 0: no block is a hole
		}
		name := "f" + string(rune('a'+i))
		want[name] = b
		if err := v.WriteFile(&sink.Header{Path: name, Mode: sink.TypeReg | 0o644, Size: int64(n)}, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	// A write that starts inside a hole's block: zeros before it in that
	// block (the head path).
	if err := v.WriteFile(&sink.Header{Path: "hole", Mode: sink.TypeReg | 0o644, Size: 1}, bytes.NewReader([]byte{7})); err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile("hole")
	if err != nil {
		t.Fatal(err)
	}
	head := bytes.Repeat([]byte{0x5A}, 5000)
	if _, err := f.WriteAt(head, 10*4096+100); err != nil {
		t.Fatal(err)
	}
	hole := make([]byte, 10*4096+100+len(head))
	hole[0] = 7
	copy(hole[10*4096+100:], head)
	want["hole"] = hole

	dev, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	reused := false
	bs := int64(v.BlockSize())
	for name, b := range want {
		got := make([]byte, len(b))
		g, err := v.OpenFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.ReadAt(got, 0); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: read back differs (err %v)", name, err)
		}
		exts, err := v.FileExtents(mustLookup(t, v, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exts {
			for _, o := range old {
				if e.VolumeAt < o.VolumeAt+o.Length && o.VolumeAt < e.VolumeAt+e.Length {
					reused = true
				}
			}
			// Whole blocks as stored: the file's bytes, zeros past them
			// and zeros where the file has none (hole's hole before the
			// head write starts mid-block).
			lo, hi := e.Offset/bs*bs, (e.Offset+e.Length+bs-1)/bs*bs
			raw := make([]byte, hi-lo)
			if _, err := dev.ReadAt(raw, e.VolumeAt-(e.Offset-lo)); err != nil {
				t.Fatal(err)
			}
			for i, c := range raw {
				off := lo + int64(i)
				w := byte(0)
				if off < int64(len(b)) {
					w = b[off]
				}
				if c != w {
					t.Fatalf("%s: volume byte for file offset %d is %#x, want %#x", name, off, c, w)
				}
			}
		}
	}
	if !reused {
		t.Fatal("no new file got a block of the removed one: the test no longer checks reused blocks")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if r := ckFile(t, p); len(r.Findings) > 0 {
		t.Fatalf("Check: %v", r.Findings)
	}
}
