package volcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
)

// lsVolume makes a volume whose /d holds n files of sizes 0..n-1 (so -l's
// size column widens as it goes) plus a device and a symlink, and an empty
// /e.
func lsVolume(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v.ext4")
	v, err := ext4lite.Create(p, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 123)
	for _, d := range []string{"d", "e"} {
		if err := v.Mkdir(&sink.Header{Path: d, Mode: sink.TypeDir | 0o755, Mtime: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		h := &sink.Header{Path: fmt.Sprintf("d/f%05d", i), Mode: sink.TypeReg | 0o644, Size: int64(i * 37), Mtime: now,
			Xattrs: map[string][]byte{"user.i": []byte(fmt.Sprint(i, "<&>"))}}
		if err := v.WriteFile(h, bytes.NewReader(make([]byte, h.Size))); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Mknod(&sink.Header{Path: "d/null", Mode: sink.TypeChar | 0o666, Devmajor: 1, Devminor: 3, Mtime: now}); err != nil {
		t.Fatal(err)
	}
	if err := v.Symlink(&sink.Header{Path: "d/link", Mode: sink.TypeSymlink | 0o777, Linkname: "f00001", Mtime: now}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLsJSONStreamsTheWholeArray: ls --json, which prints one entry at a
// time, prints what encoding the whole listing at once printed (the
// output scripts parse), for a directory, an empty one and a file.
func TestLsJSONStreamsTheWholeArray(t *testing.T) {
	vol := lsVolume(t, 1500)
	v, err := openVolume(vol, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, p := range []string{"/d", "/e", "/d/f00007", "/"} {
		var got bytes.Buffer
		if err := ls(&got, []string{vol, p}, false, true); err != nil {
			t.Fatal(err)
		}
		// The whole listing, encoded at once.
		var hs []*sink.Header
		cp := ext4lite.CleanPath(p)
		h, err := v.Lstat(cp)
		if err != nil {
			t.Fatal(err)
		}
		if h.Type() == sink.TypeDir {
			names, _ := v.ReadDir(cp)
			for _, n := range names {
				eh, err := v.Lstat(path.Join(cp, n))
				if err != nil {
					t.Fatal(err)
				}
				eh.Path = n
				hs = append(hs, eh)
			}
		} else {
			h.Path = path.Base(cp)
			hs = append(hs, h)
		}
		// What encoding the whole listing at once printed.
		all := []lsEntry{}
		for _, h := range hs {
			all = append(all, lsEntryOf(h))
		}
		var whole bytes.Buffer
		if err := cliutil.PrintJSON(&whole, all); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), whole.Bytes()) {
			t.Fatalf("%s: the streamed listing differs from the whole one:\n%.400s\nwant\n%.400s", p, got.Bytes(), whole.Bytes())
		}
		var a []map[string]any
		if err := json.Unmarshal(got.Bytes(), &a); err != nil || len(a) != len(hs) {
			t.Fatalf("%s: %d entries, want %d (%v)", p, len(a), len(hs), err)
		}
	}
}

// TestLsLongChunks: ls -l aligns each run of lsChunk entries on its own
// and prints every entry once, in order.
func TestLsLongChunks(t *testing.T) {
	vol := lsVolume(t, lsChunk+300)
	var out bytes.Buffer
	if err := ls(&out, []string{vol, "/d"}, true, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != lsChunk+302 {
		t.Fatalf("%d lines, want %d", len(lines), lsChunk+302)
	}
	for i, l := range lines[:lsChunk+300] {
		if !strings.HasSuffix(l, fmt.Sprintf(" f%05d", i)) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
	// Within a chunk the name column starts at one offset.
	col := func(l string) int { return strings.LastIndex(l, " f") }
	for _, r := range [][2]int{{0, lsChunk}, {lsChunk, lsChunk + 300}} {
		for i := r[0]; i < r[1]; i++ {
			if col(lines[i]) != col(lines[r[0]]) {
				t.Fatalf("line %d's name column %d, the chunk's first %d", i, col(lines[i]), col(lines[r[0]]))
			}
		}
	}
}
