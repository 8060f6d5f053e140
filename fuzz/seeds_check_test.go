package fuzz

import (
	"bytes"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/ext4lite/ext4test"
)

// TestExt4Seeds: every seed is a clean volume (journaled ones once
// replayed) holding each structure the mutators aim at, so FuzzExt4 and
// FuzzReplay start from real structure, not from refusals.
func TestExt4Seeds(t *testing.T) {
	plain, jr := ext4Seeds(t)
	if !seedTools {
		t.Logf("mkfs.ext4 or debugfs missing: %d seeds from ext4lite alone", len(plain))
	}
	for _, s := range append(append([]ext4Seed{}, plain...), jr...) {
		im, err := ext4test.Parse(bytes.Clone(s.img))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := len(im.IndexEntries()); n == 0 {
			t.Errorf("%s: no extent index entry to re-point", s.name)
		}
		dev := ext4test.MemDevice(bytes.Clone(s.img))
		v, err := ext4lite.OpenDevice(dev, nil) // replays a journal
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := ext4lite.Check(dev, nil)
		if err != nil || !r.Clean() {
			if err == nil {
				err = r.Err()
			}
			t.Errorf("%s: Check: %v", s.name, err)
		}
	}
	for _, s := range jr {
		im, _ := ext4test.Parse(bytes.Clone(s.img))
		if n := len(im.JournalTags()); n < 3 {
			t.Errorf("%s: %d journal tags, want the 3 debugfs wrote", s.name, n)
		}
	}
}
