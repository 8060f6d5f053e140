package volcmd_test

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/sink"
)

// guestNames are names a guest can give files of its volume (ext4 refuses
// only "/" and NUL): terminal control sequences, a newline that forges a
// line of the listing, a byte that is not UTF-8, a right-to-left override.
var guestNames = []string{
	"\x1b]0;pwned\x07",
	"\x1b[2J\x1b[Hclean",
	"a\nforged-line",
	"cr\rback",
	"bad\xffutf8",
	"rtl\u202eexe.txt",
	`"quoted"`,
}

// TestLsQuotesGuestNames plays a guest that names its files (and a
// symlink's target) with escape sequences and newlines, then lists the
// volume on the host: ls and ls -l must print every name on one line and
// no control byte (they printed them raw before), and ls --json must keep
// the names exactly.
func TestLsQuotesGuestNames(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "v.ext4")
	v, err := ext4lite.Create(vol, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := v.CreateAt(ext4lite.RootIno, "d", &sink.Header{Mode: sink.TypeDir | 0o755})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range guestNames {
		if _, err := v.CreateAt(d, n, &sink.Header{Mode: sink.TypeReg | 0o644}); err != nil {
			t.Fatalf("create %q: %v", n, err)
		}
	}
	if _, err := v.CreateAt(d, "link", &sink.Header{Mode: sink.TypeSymlink, Linkname: "\x1b[31mred\nforged"}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	want := len(guestNames) + 1
	for _, args := range [][]string{{"ls", vol, "d"}, {"ls", "-l", vol, "d"}} {
		out := mustRun(t, args...)
		if strings.ContainsFunc(out, func(r rune) bool { return r < 0x20 && r != '\n' || r == 0x7f || r == 0x202e }) {
			t.Errorf("gvx-vol %v prints control characters:\n%q", args, out)
		}
		if lines := strings.Count(out, "\n"); lines != want {
			t.Errorf("gvx-vol %v: %d lines for %d entries:\n%q", args, lines, want, out)
		}
		if !strings.Contains(out, `"\x1b]0;pwned\a"`) || !strings.Contains(out, `"\"quoted\""`) {
			t.Errorf("gvx-vol %v does not quote as %%q does:\n%s", args, out)
		}
	}
	var entries []struct {
		Path     string `json:"path"`
		Linkname string `json:"linkname"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "ls", "--json", vol, "d")), &entries); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Path] = true
	}
	for _, n := range guestNames {
		if !got[n] && !strings.Contains(n, "\xff") { // JSON has no form for a byte that is not UTF-8
			t.Errorf("ls --json lost %q: %v", n, entries)
		}
	}
}

// TestExportLeavesOutGuestSockets: a guest makes a socket file in its
// volume (mknod S_IFSOCK through the volume server, here CreateAt) next to
// a regular file. gvx-vol export succeeds, leaves the socket out with a
// warning that names it (quoted, as a guest's name), and keeps the file.
// Before, the export of the whole volume failed at the socket, though the
// help said sockets are skipped with a warning.
func TestExportLeavesOutGuestSockets(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "v.ext4")
	v, err := ext4lite.Create(vol, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.CreateAt(ext4lite.RootIno, "s\x1b[2J", &sink.Header{Mode: sink.TypeSocket | 0o755}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.CreateAt(ext4lite.RootIno, "kept", &sink.Header{Mode: sink.TypeReg | 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "export", vol, filepath.Join(dir, "out.tar"))
	if !strings.Contains(out, `left out the socket "s\x1b[2J"`) {
		t.Errorf("no warning naming the socket, quoted:\n%q", out)
	}
	f, err := os.Open(filepath.Join(dir, "out.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if !slices.Contains(names, "kept") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "s") }) {
		t.Errorf("archive entries %q: want kept and no socket", names)
	}
}

// TestExportLinkedDirs exports volumes debugfs gave hard links to
// directories (issue 26: link a a/b/up; link / a/b/root — and 40 nested
// directories each named twice, 2^40 paths). gvx-vol export wrote 2.8 GB
// of the cycle in 120 s and went on: --max-path bounds the depth, not the
// number of paths. It now ends at once with a warning per second name,
// and the archive holds each directory once.
func TestExportLinkedDirs(t *testing.T) {
	for _, tc := range []struct {
		shape string
		warn  string // one of the warnings
		warns int
		names int
	}{
		{ext4test.LinkCycle, "left out a/b/root and everything below it: it is the root directory again", 2, 5},
		{ext4test.LinkDAG, "left out n1b and everything below it: it is the directory n1 again", ext4test.DAGDepth, ext4test.DAGDepth + 3},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			dir := t.TempDir()
			vol, err := ext4test.LinkedDirs(dir, tc.shape)
			if errors.Is(err, ext4test.ErrNoTools) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.tar")
			type result struct {
				out  string
				code int
			}
			done := make(chan result, 1)
			go func() { o, c := run(t, "export", vol, out); done <- result{o, c} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("gvx-vol export did not end in 60 s")
			}
			if r.code != 0 {
				t.Fatalf("exit %d:\n%s", r.code, r.out)
			}
			if !strings.Contains(r.out, tc.warn) || strings.Count(r.out, "hard link to a directory") != tc.warns {
				t.Errorf("want %d warnings, one %q:\n%s", tc.warns, tc.warn, r.out)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() > 1<<20 {
				t.Errorf("archive of %d bytes", st.Size())
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n := 0
			for tr := tar.NewReader(f); ; n++ {
				if _, err := tr.Next(); err != nil {
					break
				}
			}
			if n != tc.names {
				t.Errorf("archive holds %d entries, want %d", n, tc.names)
			}
		})
	}
}

// TestFsckLinkedDirs: gvx-vol fsck of those volumes ends, names each
// second link to a directory, and exits 4 (findings), as e2fsck -fn does
// ("Entry 'up' in /a/b (13) is a link to directory /a (12)").
func TestFsckLinkedDirs(t *testing.T) {
	for _, tc := range []struct{ shape, want string }{
		{ext4test.LinkCycle, `entry "root" is a link to the root directory`},
		{ext4test.LinkDAG, `entry "n1b" is a second link to directory 12 (first in 2)`},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			vol, err := ext4test.LinkedDirs(t.TempDir(), tc.shape)
			if errors.Is(err, ext4test.ErrNoTools) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			out, code := run(t, "fsck", vol)
			if code != 4 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 4 and %q:\n%s", code, tc.want, out)
			}
		})
	}
}
