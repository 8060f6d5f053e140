package ext4lite

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBulkLoadE2fsck: e2fsck -fn passes a volume CreateFilled made, and
// refuses (exit non-zero, bad magic) one whose bulk load never reached
// Close, after flushes that put most of its metadata on disk: nothing
// takes the half volume for a filesystem, its backups included.
func TestBulkLoadE2fsck(t *testing.T) {
	if _, err := exec.LookPath("e2fsck"); err != nil {
		t.Skip("e2fsck not installed (apt-get install e2fsprogs)")
	}
	dir := t.TempDir()
	done := filepath.Join(dir, "done.ext4")
	if err := CreateFilled(done, 64<<20, nil, func(v *FS) error {
		for _, op := range crashWorkload() {
			if err := op.do(v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e2fsckClean(t, done)

	half := filepath.Join(dir, "half.ext4")
	v, err := Create(half, 64<<20, &CreateOptions{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range crashWorkload() {
		if err := op.do(v); err != nil {
			t.Fatal(err)
		}
		if err := v.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	// The process dies here: copy the file as it is, without Close.
	b, err := os.ReadFile(half)
	if err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(dir, "killed.ext4")
	if err := os.WriteFile(killed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	v.Close()
	out, err := exec.Command("e2fsck", "-fn", killed).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "agic") {
		t.Fatalf("e2fsck -fn of a bulk load killed before Close: %v (want a refusal for bad magic)\n%s", err, out)
	}
	if _, err := Open(killed, &Options{ReadOnly: true}); err == nil {
		t.Fatal("ext4lite opened a bulk load killed before Close")
	}
}
