package erofs

import (
	"bytes"
	"errors"
	"testing"
)

// TestReaderLimits: an image past ReaderOptions gets an error wrapping
// ErrTooLarge from the call that would have grown with it (Check's inode
// map, ReadDir's names), before the allocation; the defaults read the
// same image whole.
func TestReaderLimits(t *testing.T) {
	b := NewBuilder(Options{Profile: ProfileRuntime})
	defer b.Close()
	populate(t, b, treeSpec{BigDir: 3000, Deep: 10})
	raw, img := build(t, b)
	if _, err := img.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	names, err := img.ReadDir("big")
	if err != nil || len(names) < 3000 {
		t.Fatalf("defaults: ReadDir(big) = %d names, %v", len(names), err)
	}

	small, err := OpenOptions(bytes.NewReader(raw), int64(len(raw)), ReaderOptions{MaxInodes: 100, MaxDirEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := small.Check(); !errors.Is(err, ErrTooLarge) || !errors.As(err, &le) || le.What != "inodes" {
		t.Errorf("Check with MaxInodes 100 of %d inodes: %v", img.Inodes(), err)
	}
	if _, err := small.ReadDir("big"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadDir of 3000 names with MaxDirEntries 1000: %v", err)
	}
	if _, err := small.ReadDir("."); err != nil {
		t.Errorf("ReadDir of a small directory: %v", err)
	}
}
