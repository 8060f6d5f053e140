package ext4lite

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
)

// TestFacesAgree: each change made through the path face (tools,
// importers) and through the inode face (the volume server) leaves the
// same inode behind, since both run one implementation: two files get the
// same xattr, mode, owner and times, one by path and one by inode, and
// stat the same by Lstat and Stat; removing an absent attribute is
// ENODATA through both (RemovexattrIno, split from SetxattrIno's old
// remove flag).
func TestFacesAgree(t *testing.T) {
	now := time.Unix(1700000000, 0)
	v, _ := newVolume(t, 16<<20)
	v.opts.Now = func() time.Time { return now } // both files' ctime alike
	for _, p := range []string{"a", "b"} {
		if err := v.WriteFile(&sink.Header{Path: p, Mode: sink.TypeReg | 0o644, Size: 2}, strings.NewReader("hi")); err != nil {
			t.Fatal(err)
		}
	}
	h, err := v.Lstat("b")
	if err != nil {
		t.Fatal(err)
	}
	b := Ino(h.Ino)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mode, uid, gid := uint32(0o2750), uint32(70000), uint32(5)
	at, mt := time.Unix(100, 7), time.Unix(200, 9)
	must("Setxattr", v.Setxattr("a", "user.x", []byte("1")))
	must("SetxattrIno", v.SetxattrIno(b, "user.x", []byte("1")))
	must("Setxattr", v.Setxattr("a", "user.gone", []byte("2")))
	must("SetxattrIno", v.SetxattrIno(b, "user.gone", []byte("2")))
	must("Removexattr", v.Removexattr("a", "user.gone"))
	must("RemovexattrIno", v.RemovexattrIno(b, "user.gone"))
	if err := v.Removexattr("a", "user.gone"); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("Removexattr of an absent attribute: %v, want ENODATA", err)
	}
	if err := v.RemovexattrIno(b, "user.gone"); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("RemovexattrIno of an absent attribute: %v, want ENODATA", err)
	}
	must("Chmod", v.Chmod("a", mode))
	must("Chown", v.Chown("a", uid, gid))
	must("Chtimes", v.Chtimes("a", at, mt))
	must("SetAttrIno", v.SetAttrIno(b, SetAttr{Mode: &mode, UID: &uid, GID: &gid, Atime: &at, Mtime: &mt}))
	ha, err := v.Lstat("a")
	must("Lstat", err)
	hb, err := v.Stat(b)
	must("Stat", err)
	if hb.Path != "" {
		t.Errorf("Stat(ino) set Path %q", hb.Path)
	}
	ha.Path, ha.Ino, hb.Ino = "", 0, 0
	if !reflect.DeepEqual(ha, hb) {
		t.Errorf("the path face and the inode face disagree:\n Lstat(a) %+v\n Stat(b)  %+v", ha, hb)
	}
}
