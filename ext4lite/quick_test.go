package ext4lite

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

func TestQuickE2fsck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v.ext4")
	uuid := [16]byte{1, 2, 3}
	v, err := Create(p, 256<<20, &CreateOptions{UUID: &uuid, Time: time.Unix(1700000000, 5)})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000001, 123456789)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(v.Mkdir(&sink.Header{Path: "a", Mode: sink.TypeDir | 0o755, Mtime: ts}))
	must(v.WriteFile(&sink.Header{Path: "a/f", Mode: sink.TypeReg | 0o644, Size: 5, Mtime: ts, Xattrs: map[string][]byte{"user.x": []byte("y"), "trusted.overlay.opaque": []byte("y")}}, strings.NewReader("hello")))
	big := bytes.Repeat([]byte("x"), 3<<20)
	must(v.WriteFile(&sink.Header{Path: "a/big", Mode: sink.TypeReg | 0o644, Size: int64(len(big))}, bytes.NewReader(big)))
	must(v.Symlink(&sink.Header{Path: "a/l", Linkname: "f"}))
	must(v.Symlink(&sink.Header{Path: "a/l2", Linkname: strings.Repeat("z", 100)}))
	must(v.Mknod(&sink.Header{Path: "a/wh", Mode: sink.TypeChar}))
	must(v.Mknod(&sink.Header{Path: "a/fifo", Mode: sink.TypeFifo | 0o600}))
	must(v.Link("a/f", "hl"))
	must(v.Mkdir(&sink.Header{Path: "many", Mode: sink.TypeDir | 0o755}))
	for i := 0; i < 3000; i++ {
		must(v.WriteFile(&sink.Header{Path: fmt.Sprintf("many/file-%05d", i), Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("z")))
	}
	must(v.Close())
	out, err := exec.Command("e2fsck", "-fn", p).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	v, err = Open(p, &Options{ReadOnly: true})
	must(err)
	h, err := v.Lstat("a/f")
	must(err)
	t.Logf("%+v", h)
	names, err := v.ReadDir("many")
	must(err)
	if len(names) != 3000 {
		t.Fatal(len(names))
	}
	os.Getenv("")
}
