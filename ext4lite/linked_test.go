package ext4lite

import (
	"errors"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite/ext4test"
)

// linkedVolume makes a LinkedDirs volume of the given shape (debugfs's
// hard links to directories), or skips without e2fsprogs.
func linkedVolume(t *testing.T, shape string) string {
	t.Helper()
	img, err := ext4test.LinkedDirs(t.TempDir(), shape)
	if errors.Is(err, ext4test.ErrNoTools) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestRemoveAllLinkedDirs removes trees of volumes that hold hard links to
// directories, as an OCI whiteout applied to a crafted volume does
// (overlay's walkers call RemoveAll). RemoveAll recursed through every
// name: round a/b/root → / → a → … until the Go stack overflowed and the
// process died, or, through a second name, out of the tree it was asked to
// remove and freeing directories twice. It now enters only a directory's
// own subdirectories (their ".." is the directory), each once, and stops
// at a second name with an error wrapping ErrCorrupt that names it.
func TestRemoveAllLinkedDirs(t *testing.T) {
	for _, tc := range []struct {
		shape, path, want string
	}{
		{ext4test.LinkCycle, "a", `"a/b/root" is a second name for the root directory`},
		{ext4test.LinkCycle, "a/b/up", `"a/b/up" is a second name for directory 12, whose '..' is directory 2`},
		{ext4test.LinkDAG, "n1/n2b", `/n39/n40b" is a second name for directory 51, removed already`},
	} {
		t.Run(tc.shape+"/"+tc.path, func(t *testing.T) {
			v, err := Open(linkedVolume(t, tc.shape), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = v.RemoveAll(tc.path)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RemoveAll(%q) = %v, want ErrCorrupt and %q", tc.path, err, tc.want)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckLinkedDirs: Check of those volumes ends and reports each second
// link to a directory, as e2fsck -fn does ("Entry 'up' in /a/b (13) is a
// link to directory /a (12)", "Entry 'root' in /a/b (13) is a link to the
// root inode"), and the link counts those names add.
func TestCheckLinkedDirs(t *testing.T) {
	for _, tc := range []struct {
		shape string
		want  []string
	}{
		{ext4test.LinkCycle, []string{`entry "up" is a second link to directory 12 (first in 2)`,
			`entry "root" is a link to the root directory`, "inode 2: link count 4, counted 5"}},
		{ext4test.LinkDAG, []string{`entry "n1b" is a second link to directory 12 (first in 2)`,
			`entry "n40b" is a second link to directory 51 (first in 50)`}},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			v, err := Open(linkedVolume(t, tc.shape), &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			r, err := v.Check(nil)
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, f := range r.Findings {
				all = append(all, f.String())
			}
			got := strings.Join(all, "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("no finding %q in:\n%s", w, got)
				}
			}
		})
	}
}
