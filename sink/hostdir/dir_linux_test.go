package hostdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Conformance(t, func() (sink.Sink, sink.Source) {
		d := New(t.TempDir())
		return d, d
	})
}

// TestHolesStayHoles checks with the kernel's block counts that all-zero
// blocks are not written, including data past 5 GiB.
func TestHolesStayHoles(t *testing.T) {
	root := t.TempDir()
	d := New(root)
	if err := sinktest.EdgeTree(d, sinktest.TreeOptions{HugeSparse: true, Unprivileged: os.Geteuid() != 0, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path      string
		maxBlocks int64 // 512-byte units
	}{
		{"sparse/all-hole", 0},
		{"sparse/hole-middle", 3 * 8},
		{"sparse/past-5GiB", 64},
	} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, c.path), &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks > c.maxBlocks {
			t.Errorf("%s: %d blocks allocated, want at most %d", c.path, st.Blocks, c.maxBlocks)
		}
	}
	// And the contents read back right around the data.
	r, err := d.Open("sparse/past-5GiB")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := r.(*os.File)
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, 5<<30+4095); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 0 || buf[1] == 0 {
		t.Errorf("bytes around 5 GiB + 4 KiB: %v", buf)
	}
}

func TestSymlinkEscapeRefused(t *testing.T) {
	outside := t.TempDir()
	d := New(t.TempDir())
	if err := d.Symlink(&sink.Header{Path: "esc", Mode: sink.TypeSymlink | 0o777, Linkname: outside}); err != nil {
		t.Fatal(err)
	}
	err := d.WriteFile(&sink.Header{Path: "esc/pwned", Mode: sink.TypeReg | 0o644}, strings.NewReader(""))
	if !errors.Is(err, sink.ErrSymlinkInPath) {
		t.Fatalf("write through symlink: %v", err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Fatalf("wrote outside the tree: %v", names)
	}
}
