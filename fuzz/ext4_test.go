package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/jbd2"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// Mutation ops of FuzzExt4's input: records of three bytes [op, a, b]
// after the seed byte.
const (
	opRepoint  = iota // index entry a → tree block b (of any file)
	opSizeHigh        // i_size_high of in-use inode a = garbage from b
	opDescSize        // s_desc_size = one of descSizes[a]
	opTag             // journal tag a → home block homes[b], flags flipped by a>>4
	opFlip            // one byte anywhere, chosen by a and b
	nOps
)

var descSizes = []uint16{0, 32, 63, 64, 65, 96, 128, 1024, 65535}

// FuzzExt4: see the package doc. The input's first byte picks the seed
// (plain and journaled images in one list), then mutation records follow.
func FuzzExt4(f *testing.F) {
	plain, jr := ext4Seeds(f)
	seeds := append(append([]ext4Seed{}, plain...), jr...)
	for i := range seeds {
		b := byte(i)
		f.Add([]byte{b})
		f.Add([]byte{b, opRepoint, 0, 1})
		f.Add([]byte{b, opRepoint, 1, 0, opRepoint, 0, 0})
		f.Add([]byte{b, opSizeHigh, 3, 0xff})
		f.Add([]byte{b, opDescSize, 6, 0})
		f.Add([]byte{b, opTag, 0x10, 3})
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		img := mutateExt4(seeds[int(in[0])%len(seeds)].img, in[1:])
		exerciseExt4(t, img)
	})
}

// TestExt4LinkedDirs runs FuzzExt4's checks on volumes debugfs gave hard
// links to directories (a cycle; nested shared subtrees), which the
// mutators do not make: the export stops at the second name (before, it
// ran into the harness's 64 MiB cap, or past it for ever), with an error
// the harness accepts, and Check reports the links. They are not in the
// seed list: the input's first byte indexes it, and the inputs kept in
// testdata/fuzz would change meaning.
func TestExt4LinkedDirs(t *testing.T) {
	for _, shape := range []string{ext4test.LinkCycle, ext4test.LinkDAG} {
		t.Run(shape, func(t *testing.T) {
			p, err := ext4test.LinkedDirs(t.TempDir(), shape)
			if errors.Is(err, ext4test.ErrNoTools) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			img, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			exerciseExt4(t, img)
			v, err := ext4lite.OpenDevice(ext4test.MemDevice(img), &ext4lite.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			err = overlay.ExportTar(&capWriter{w: io.Discard, left: 64 << 20}, v, overlay.ExportOptions{SkipSockets: true})
			if !errors.Is(err, sink.ErrDirLinked) {
				t.Errorf("ExportTar = %v, want sink.ErrDirLinked", err)
			}
		})
	}
}

// mutateExt4 applies the mutation records to a copy of seed.
func mutateExt4(seed, ops []byte) []byte {
	img := bytes.Clone(seed)
	im, err := ext4test.Parse(img)
	if err != nil {
		return img
	}
	for p := 0; p+3 <= len(ops) && p < 3*16; p += 3 {
		op, a, b := ops[p]%nOps, int(ops[p+1]), int(ops[p+2])
		switch op {
		case opRepoint:
			es := im.IndexEntries()
			if len(es) == 0 {
				continue
			}
			leaves := make([]uint64, 0, len(es)+1)
			for _, e := range es {
				leaves = append(leaves, e.Leaf)
			}
			leaves = append(leaves, 0) // and block 0: the superblock's
			im.RepointIndex(es[a%len(es)], leaves[b%len(leaves)])
		case opSizeHigh:
			inos := im.InUse(256)
			if len(inos) == 0 {
				continue
			}
			im.SetSizeHigh(inos[a%len(inos)], uint32(b)<<24|uint32(b))
		case opDescSize:
			im.SetDescSize(descSizes[a%len(descSizes)])
		case opTag:
			tags := im.JournalTags()
			if len(tags) == 0 {
				continue
			}
			homes := []uint64{0, 1, 2, uint64(len(img)/1024) - 1, uint64(len(img) / 1024), 1<<32 + 1, 1 << 63, uint64(b)}
			im.SetJournalTag(tags[a%len(tags)], homes[b%len(homes)], uint32(a>>4))
		case opFlip:
			img[(a<<8|b)*61%len(img)] ^= 0xFF
		}
	}
	return img
}

// ext4ErrOK lists what a hostile volume may make ext4lite return.
var ext4ErrOK = []error{ext4lite.ErrCorrupt, ext4lite.ErrUnsupported, ext4lite.ErrNotExt4, ext4lite.ErrNoSpace,
	fs.ErrNotExist, sink.ErrSymlinkInPath, syscall.ENOTDIR, syscall.EISDIR, syscall.EINVAL, syscall.ENAMETOOLONG,
	syscall.ENOTEMPTY, syscall.EMLINK, syscall.ENODATA, syscall.EEXIST, syscall.EFBIG, syscall.E2BIG, syscall.ERANGE,
	jbd2.ErrCorrupt, jbd2.ErrUnsupported, errExportCap, sink.ErrDirLinked}

func ext4Err(t *testing.T, op string, err error, clean bool) {
	t.Helper()
	if clean && (errors.Is(err, ext4lite.ErrCorrupt) || errors.Is(err, ext4lite.ErrNotExt4)) {
		t.Fatalf("%s: Check found the volume clean, ext4lite says %v", op, err)
	}
	for _, e := range ext4ErrOK {
		if errors.Is(err, e) {
			return
		}
	}
	t.Fatalf("%s: error wraps no documented sentinel: %v (%T)", op, err, err)
}

// exerciseExt4 runs Check, a read-only export through overlay and its
// re-import into a MemFS (the two trees must be equal), and a write phase
// (a clean volume must stay clean).
func exerciseExt4(t *testing.T, img []byte) {
	r, err := ext4lite.Check(ext4test.MemDevice(bytes.Clone(img)), &ext4lite.CheckOptions{MaxFindings: 20})
	if err != nil {
		ext4Err(t, "Check", err, false)
	}
	clean := err == nil && r.Clean()

	v, err := ext4lite.OpenDevice(ext4test.MemDevice(bytes.Clone(img)), &ext4lite.Options{ReadOnly: true})
	if err != nil {
		ext4Err(t, "OpenDevice", err, clean)
	} else {
		var tarball bytes.Buffer
		err := overlay.ExportTar(&capWriter{w: &tarball, left: 64 << 20}, v, overlay.ExportOptions{SkipSockets: true})
		if err != nil {
			ext4Err(t, "ExportTar", err, clean)
		} else {
			m := sinktest.NewMemFS()
			if err := overlay.ImportTar(m, bytes.NewReader(tarball.Bytes()), overlay.ImportOptions{}); err != nil {
				t.Fatalf("ImportTar of what ExportTar wrote from the volume: %v", err)
			}
			if err := sinktest.Compare(v, m, sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreRoot: true}); err != nil {
				t.Fatalf("the volume and its export differ: %v", err)
			}
		}
		v.Close()
	}

	dev := ext4test.MemDevice(bytes.Clone(img))
	w, err := ext4lite.OpenDevice(dev, nil)
	if err != nil {
		ext4Err(t, "OpenDevice (read-write)", err, clean)
		return
	}
	werr := writeSome(w)
	if werr != nil {
		ext4Err(t, "write", werr, clean)
	}
	if err := w.Close(); err != nil {
		ext4Err(t, "Close", err, clean)
		return
	}
	if clean && werr == nil {
		r, err := ext4lite.Check(dev, nil)
		if err != nil {
			t.Fatalf("Check after writing to a clean volume: %v", err)
		}
		if err := r.Err(); err != nil {
			t.Fatalf("a clean volume is corrupt after ext4lite wrote to it: %v", err)
		}
	}
}

// writeSome changes the volume as a layer apply does.
func writeSome(v *ext4lite.FS) error {
	if err := v.Mkdir(&sink.Header{Path: "fuzz-new", Mode: sink.TypeDir | 0o755}); err != nil {
		return err
	}
	data := bytes.Repeat([]byte("w"), 5000)
	if err := v.WriteFile(&sink.Header{Path: "fuzz-new/f", Mode: sink.TypeReg | 0o644, Size: int64(len(data)),
		Xattrs: map[string][]byte{"user.k": []byte("v")}}, bytes.NewReader(data)); err != nil {
		return err
	}
	for _, p := range []string{"sparse", "data", "htree"} {
		if err := v.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

var errExportCap = errors.New("fuzz: export larger than the harness allows")

// capWriter fails past left bytes: a hostile volume may describe files of
// any size.
type capWriter struct {
	w    io.Writer
	left int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, fmt.Errorf("%w (%d bytes)", errExportCap, len(p))
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
