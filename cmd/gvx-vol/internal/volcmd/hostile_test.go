package volcmd_test

import (
	"archive/tar"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
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
