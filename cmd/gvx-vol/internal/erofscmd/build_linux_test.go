package erofscmd

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/erofs/erofstest"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
)

// TestBuildHostileDir runs gvx-vol erofs build on a host directory holding
// the hostile tree and checks the image shows exactly that directory (read
// back with package erofs) and passes fsck.erofs.
func TestBuildHostileDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create devices, other owners and trusted.* xattrs in the source directory")
	}
	b := erofs.NewBuilder(erofs.Options{TempDir: t.TempDir()})
	defer b.Close()
	erofstest.Populate(t, b, erofstest.TreeSpec{BigDir: 2000, Deep: 60})
	// The host filesystem cannot hold a 60 000-byte xattr value: leave it out.
	if err := b.WriteFile(&sink.Header{Path: "xattrs/large", Mode: sink.TypeReg | 0o644}, nil); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	d := hostdir.New(src)
	defer func() {
		if c, ok := any(d).(io.Closer); ok {
			c.Close()
		}
	}()
	if err := sink.Copy(d, b); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.erofs")
	if _, _, err := runApp(t, "erofs", "build", "-q", src, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	im, err := erofs.Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	erofstest.Compare(t, d, im, erofstest.CmpOpts{})
	if fsck, err := exec.LookPath("fsck.erofs"); err == nil {
		outb, err := exec.Command(fsck, out).CombinedOutput()
		if err != nil || strings.Contains(string(outb), "<E>") {
			t.Fatalf("fsck.erofs: %v\n%s", err, outb)
		}
	}
}
