package ext4lite

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"z.gfire.dev/gvx/sink"
)

// fillVolume writes files of shrinking sizes until not even one block is
// left: every later allocation fails with ErrNoSpace.
func fillVolume(t *testing.T, v *FS) {
	t.Helper()
	n := 0
	for _, size := range []int{512 << 10, 64 << 10, 4 << 10} {
		data := bytes.Repeat([]byte{0xCD}, size)
		for {
			n++
			err := v.WriteFile(&sink.Header{Path: fmt.Sprintf("fill%04d", n), Mode: sink.TypeReg | 0o644, Size: int64(size)}, bytes.NewReader(data))
			if errors.Is(err, ErrNoSpace) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSymlinkNoSpaceLeavesNothing: a symlink whose target needs a block
// (60 bytes and more), made on a full volume, fails with ErrNoSpace through
// both faces (Symlink, the sink's; CreateAt, the volume server's) and
// leaves no inode behind: Check finds nothing. Symlink used to keep the
// inode it had allocated, linked from no directory.
func TestSymlinkNoSpaceLeavesNothing(t *testing.T) {
	target := strings.Repeat("t", 100)
	for _, face := range []string{"Symlink", "CreateAt"} {
		t.Run(face, func(t *testing.T) {
			v, p := newVolume(t, 8<<20)
			fillVolume(t, v)
			var err error
			if face == "Symlink" {
				err = v.Symlink(&sink.Header{Path: "link", Mode: sink.TypeSymlink | 0o777, Linkname: target})
			} else {
				_, err = v.CreateAt(RootIno, "link", &sink.Header{Mode: sink.TypeSymlink | 0o777, Linkname: target})
			}
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("%s with a %d-byte target on a full volume: %v, want ErrNoSpace", face, len(target), err)
			}
			if _, err := v.Lstat("link"); err == nil {
				t.Errorf("link exists after a failed %s", face)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Open(p, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rep, err := r.Check(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Findings) > 0 {
				t.Fatalf("check after a failed %s: %v", face, rep.Findings)
			}
		})
	}
}
