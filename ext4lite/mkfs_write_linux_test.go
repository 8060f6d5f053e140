package ext4lite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite/internal/disk"
	"z.gfire.dev/gvx/sink"
)

// TestDescSize128Writes: a volume whose group descriptors are 128 bytes
// (mkfs.ext4 -O 64bit -E desc_size=128, which e2fsck calls clean) takes
// writes, a compaction and a close. The bytes of each descriptor past the
// 64 ext4lite knows are kept (here made non-zero, checksummed as the kernel
// does, over the whole descriptor), and e2fsck -fn and Check find nothing.
// Before: disk.(*GroupDesc).EncodeInto panicked (slice bounds [:128] with
// length 64) on the first flush.
func TestDescSize128Writes(t *testing.T) {
	for _, tc := range []struct {
		name, size string
		opts       []string
	}{
		{"1k", "32M", []string{"-O", "64bit", "-E", "desc_size=128"}},
		{"4k", "160M", []string{"-b", "4096", "-O", "64bit", "-E", "desc_size=128"}},
		{"4k-uninit_bg", "160M", []string{"-b", "4096", "-O", "64bit,^metadata_csum,uninit_bg", "-E", "desc_size=128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := ckMkfs(t, tc.size, "", tc.opts...)
			im := ckLoad(t, img)
			if im.sb.DescSize != 128 {
				t.Fatalf("mkfs made s_desc_size %d", im.sb.DescSize)
			}
			groups := int((im.sb.BlocksCount() - uint64(im.sb.FirstDataBlock) + uint64(im.sb.BlocksPerGroup) - 1) / uint64(im.sb.BlocksPerGroup))
			csum := im.sb.FeatureROCompat&disk.ROCompatMetadataCsum != 0
			// Bytes a later kernel might define: ext4lite must carry them.
			tail := func(g int) []byte {
				return im.b[im.gdOff(uint32(g))+disk.GroupDescSize64 : im.gdOff(uint32(g))+128]
			}
			for g := 0; g < groups; g++ {
				for i := range tail(g) {
					tail(g)[i] = byte(g + i + 1)
				}
				raw := im.b[im.gdOff(uint32(g)) : im.gdOff(uint32(g))+128]
				if csum {
					im.fixGroup(uint32(g))
				} else {
					binary.LittleEndian.PutUint16(raw[0x1E:], disk.GroupDescChecksumCrc16(im.sb.UUID, uint32(g), raw))
				}
			}
			want := make([][]byte, groups)
			for g := range want {
				want[g] = bytes.Clone(tail(g))
			}
			if err := os.WriteFile(img, im.b, 0o644); err != nil {
				t.Fatal(err)
			}
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Fatalf("e2fsck -fn exit %d on the crafted image before any write:\n%s", code, out)
			}

			v, err := Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ckManyFiles(40, 300<<10)(v); err != nil {
				t.Fatal(err)
			}
			if err := v.RemoveAll("d3"); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Compact(); err != nil {
				t.Fatal(err)
			}
			body := strings.Repeat("after compact\n", 1000)
			if err := v.WriteFile(&sink.Header{Path: "after", Mode: sink.TypeReg | 0o644, Size: int64(len(body))}, strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Errorf("e2fsck -fn exit %d after ext4lite wrote:\n%s", code, out)
			}
			if err := ckFile(t, img).Err(); err != nil {
				t.Error(err)
			}
			im = ckLoad(t, img)
			for g := 0; g < groups; g++ {
				if !bytes.Equal(tail(g), want[g]) {
					t.Errorf("group %d: descriptor bytes 64..127 changed: % x, want % x", g, tail(g), want[g])
				}
			}
			// Backups of the table carry the same bytes.
			bs := int(im.bs)
			backup := (int(im.sb.FirstDataBlock)+int(im.sb.BlocksPerGroup))*bs + bs
			if got := im.b[backup+disk.GroupDescSize64 : backup+128]; !bytes.Equal(got, want[0]) {
				t.Errorf("group 1's copy of descriptor 0: bytes 64..127 % x, want % x", got, want[0])
			}
		})
	}
}

// TestWriteMkfsVariants: volumes mkfs.ext4 makes with the feature variants
// other tools and older defaults use take ext4lite's writes (files over
// several groups, xattrs, deletes, a compaction) and stay clean under
// e2fsck -fn and Check; variants ext4lite does not write are refused at
// open with ErrUnsupported, never half-written.
func TestWriteMkfsVariants(t *testing.T) {
	for _, tc := range []struct {
		name, size string
		opts       []string
		refused    bool
	}{
		{"default-1k", "32M", nil, false},
		{"4k", "64M", []string{"-b", "4096"}, false},
		{"32bit", "32M", []string{"-O", "^64bit"}, false},
		{"32bit-4k", "64M", []string{"-b", "4096", "-O", "^64bit"}, false},
		{"no-metadata_csum", "32M", []string{"-O", "^metadata_csum"}, false},
		{"uninit_bg", "32M", []string{"-O", "^metadata_csum,uninit_bg"}, false},
		{"small-journal", "32M", []string{"-J", "size=1"}, false},
		{"no-journal", "32M", []string{"-O", "^has_journal"}, false},
		{"inode128", "32M", []string{"-I", "128"}, false},
		{"no-flex_bg", "32M", []string{"-O", "^flex_bg"}, false},
		{"no-resize_inode", "32M", []string{"-O", "^resize_inode"}, false},
		{"no-huge_file", "32M", []string{"-O", "^huge_file"}, false},
		{"sparse_super2", "32M", []string{"-O", "sparse_super2"}, false},
		{"desc_size-128", "32M", []string{"-O", "64bit", "-E", "desc_size=128"}, false},
		{"bigalloc", "64M", []string{"-b", "4096", "-O", "bigalloc"}, true},
		{"meta_bg", "32M", []string{"-O", "^resize_inode,meta_bg"}, true},
		{"inline_data", "32M", []string{"-O", "inline_data"}, true},
		{"no-extent", "32M", []string{"-O", "^extent,^64bit"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := ckMkfs(t, tc.size, "", tc.opts...)
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Fatalf("e2fsck -fn exit %d on mkfs's image:\n%s", code, out)
			}
			v, err := Open(img, nil)
			if tc.refused {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("Open: %v, want ErrUnsupported", err)
				}
				if code, out := ckE2fsck(t, img); code != 0 {
					t.Errorf("the refused open changed the image: e2fsck -fn exit %d\n%s", code, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := ckManyFiles(30, 200<<10)(v); err != nil {
				t.Fatal(err)
			}
			x := map[string][]byte{"user.a": []byte("x"), "user.b": bytes.Repeat([]byte("y"), 600)}
			if err := v.WriteFile(&sink.Header{Path: "x", Mode: sink.TypeReg | 0o600, Xattrs: x}, strings.NewReader("")); err != nil {
				t.Fatal(err)
			}
			if err := v.RemoveAll("d2"); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Compact(); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			if code, out := ckE2fsck(t, img); code != 0 {
				t.Errorf("e2fsck -fn exit %d after ext4lite wrote:\n%s", code, out)
			}
			if err := ckFile(t, img).Err(); err != nil {
				t.Error(err)
			}
		})
	}
}
