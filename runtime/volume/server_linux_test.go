package volume

import (
	"bytes"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// TestErrnoFormatLimits: what ext4lite refuses as past the format's limits
// reaches the guest as the errno Linux's ext4 returns: E2BIG for an xattr
// value no attribute can hold, ERANGE for a name past 255 bytes, EFBIG
// for a size past the largest file. Before: ENOSPC for the value, and the
// name and the size were accepted.
func TestErrnoFormatLimits(t *testing.T) {
	v, err := ext4lite.Create(filepath.Join(t.TempDir(), "vol.ext4"), 16<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ino, err := v.CreateAt(ext4lite.RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	huge := int64(1) << 62
	for _, tc := range []struct {
		name string
		err  error
		want unix.Errno
	}{
		{"setxattr of 65536 bytes", v.SetxattrIno(ino, "user.big", bytes.Repeat([]byte{1}, 65536)), unix.E2BIG},
		{"setxattr of a 300-byte name", v.SetxattrIno(ino, "user."+string(bytes.Repeat([]byte{'n'}, 300)), []byte{1}), unix.ERANGE},
		{"truncate to 2^62", v.SetAttrIno(ino, ext4lite.SetAttr{Size: &huge}), unix.EFBIG},
	} {
		if got := errno(tc.err); got != tc.want {
			t.Errorf("%s: errno %v (from %v), want %v", tc.name, got, tc.err, tc.want)
		}
	}
}

// TestAllocEnd: the guest chooses fallocate's offset and length; a sum that
// wraps (or passes an off_t) is EFBIG, not a small or negative size.
func TestAllocEnd(t *testing.T) {
	for _, tc := range []struct {
		off, length uint64
		want        int64
		err         error
	}{
		{0, 4096, 4096, nil},
		{1 << 40, 1 << 20, 1<<40 + 1<<20, nil},
		{1 << 30, 0, 0, nil},
		{1<<63 - 1, 1, 0, unix.EFBIG},
		{1 << 63, 1, 0, unix.EFBIG},
		{1<<64 - 1, 2, 0, unix.EFBIG}, // wraps to 1
		{4096, 1<<64 - 4096, 0, unix.EFBIG},
	} {
		got, err := allocEnd(tc.off, tc.length)
		if got != tc.want || err != tc.err {
			t.Errorf("allocEnd(%d, %d) = %d, %v; want %d, %v", tc.off, tc.length, got, err, tc.want, tc.err)
		}
	}
}
