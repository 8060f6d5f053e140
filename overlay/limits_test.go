package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/sink/sinktest"
)

// TestImportLimits: a path deeper than MaxPathDepth is ENAMETOOLONG, an
// xattr value past MaxXattrSize (default 65,536 bytes, XATTR_SIZE_MAX) is
// E2BIG, both wrapping ErrTooLarge and naming the limit; a value of
// exactly the limit is stored whole.
func TestImportLimits(t *testing.T) {
	archive := func(name string, xattr int) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if xattr > 0 {
			h.PAXRecords = map[string]string{"SCHILY.xattr.user.big": strings.Repeat("v", xattr)}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		return b.Bytes()
	}
	deep := strings.Repeat("d/", 20) + "f"
	for _, tc := range []struct {
		name    string
		tar     []byte
		opts    ImportOptions
		errno   syscall.Errno
		setting string
	}{
		{"deep", archive(deep, 0), ImportOptions{MaxPathDepth: 20}, syscall.ENAMETOOLONG, "MaxPathDepth"},
		{"deep-dest", archive(strings.Repeat("d/", 15)+"f", 0), ImportOptions{MaxPathDepth: 20, Dest: "a/b/c/d/e/f"}, syscall.ENAMETOOLONG, "MaxPathDepth"},
		{"xattr-default", archive("f", 1<<16+1), ImportOptions{}, syscall.E2BIG, "MaxXattrSize"},
		{"xattr-set", archive("f", 101), ImportOptions{MaxXattrSize: 100}, syscall.E2BIG, "MaxXattrSize"},
	} {
		err := ImportTar(sinktest.NewMemFS(), bytes.NewReader(tc.tar), tc.opts)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, tc.errno) || !strings.Contains(fmt_(err), tc.setting) {
			t.Errorf("%s: %v; want ErrTooLarge and %v naming %s", tc.name, err, tc.errno, tc.setting)
		}
	}
	m := sinktest.NewMemFS()
	if err := ImportTar(m, bytes.NewReader(archive(deep, 1<<16)), ImportOptions{MaxPathDepth: 21}); err != nil {
		t.Fatalf("a path at MaxPathDepth with a 65,536-byte xattr: %v", err)
	}
	h, err := m.Lstat(deep)
	if err != nil || len(h.Xattrs["user.big"]) != 1<<16 {
		t.Errorf("the 65,536-byte xattr came back as %d bytes (%v)", len(h.Xattrs["user.big"]), err)
	}
}

func fmt_(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
