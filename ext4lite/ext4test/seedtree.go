package ext4test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"z.gfire.dev/gvx/sink"
)

// SeedTree writes the content of every fuzz seed image (ext4lite's own
// FuzzOpen seeds and the top-level fuzz harnesses'): each structure the
// parsers read appears at least once (htree, extent tree block, xattr
// block and in-inode xattrs, slow and fast symlinks, devices, hard links).
func SeedTree(s sink.Sink, bs int) error {
	t0 := time.Unix(1700000000, 5)
	hs := []*sink.Header{
		{Path: "dir", Mode: sink.TypeDir | 0o755},
		{Path: "dir/sub", Mode: sink.TypeDir | 0o700},
		{Path: "htree", Mode: sink.TypeDir | 0o755},
		{Path: "fast", Mode: sink.TypeSymlink | 0o777, Linkname: "dir/sub"},
		{Path: "slow", Mode: sink.TypeSymlink | 0o777, Linkname: strings.Repeat("long/", 20)},
		{Path: "chr", Mode: sink.TypeChar | 0o600, Devmajor: 1, Devminor: 3},
		{Path: "blk", Mode: sink.TypeBlock | 0o600, Devmajor: 259, Devminor: 70000},
		{Path: "fifo", Mode: sink.TypeFifo | 0o644},
	}
	for _, h := range hs {
		h.Mtime, h.Atime = t0, t0
		var err error
		switch h.Type() {
		case sink.TypeDir:
			err = s.Mkdir(h)
		case sink.TypeSymlink:
			err = s.Symlink(h)
		default:
			err = s.Mknod(h)
		}
		if err != nil {
			return err
		}
	}
	data := strings.Repeat("ext4lite fuzz seed ", 400)
	x := map[string][]byte{"user.small": []byte("v"), "user.big": bytes.Repeat([]byte("X"), bs/2), "trusted.overlay.opaque": []byte("y")}
	if err := s.WriteFile(&sink.Header{Path: "file", Mode: sink.TypeReg | 0o644, Size: int64(len(data)), Xattrs: x}, strings.NewReader(data)); err != nil {
		return err
	}
	if err := s.Link("file", "dir/hard"); err != nil {
		return err
	}
	// Every other block a hole: more extents than fit in the inode.
	sparse := make([]byte, 12*bs)
	for i := 0; i < len(sparse); i += 2 * bs {
		copy(sparse[i:], "data")
	}
	if err := s.WriteFile(&sink.Header{Path: "sparse", Mode: sink.TypeReg | 0o600, Size: int64(len(sparse))}, bytes.NewReader(sparse)); err != nil {
		return err
	}
	for i := 0; i < 3*bs/64; i++ {
		h := &sink.Header{Path: fmt.Sprintf("htree/entry-%03d-%s", i, strings.Repeat("n", i%20)), Mode: sink.TypeReg | 0o644}
		if err := s.WriteFile(h, strings.NewReader("")); err != nil {
			return err
		}
	}
	return nil
}
