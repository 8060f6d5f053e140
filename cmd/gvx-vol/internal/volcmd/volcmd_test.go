package volcmd_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/cmd/gvx-vol/internal/app"
	"z.gfire.dev/gvx/cmd/gvx-vol/internal/cliutil"
)

// run executes gvx-vol in-process and returns stdout and the exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	argv := append([]string{"gvx-vol"}, args...)
	a := app.New(argv)
	var out bytes.Buffer
	a.Writer, a.ErrWriter = &out, &out
	err := a.Run(argv)
	code := 0
	if err != nil {
		code = cliutil.ExitCode(err)
		out.WriteString("error: " + err.Error())
	}
	return out.String(), code
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code := run(t, args...)
	if code != 0 {
		t.Fatalf("gvx-vol %v: exit %d\n%s", args, code, out)
	}
	return out
}

func writeTar(t *testing.T, path string, entries []*tar.Header, bodies map[string]string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		body := bodies[h.Name]
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVolumeVerbs(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "v.ext4")
	mt := time.Unix(1700000000, 123456789)
	src := filepath.Join(dir, "in.tar")
	writeTar(t, src, []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt, Format: tar.FormatPAX},
		{Name: "etc/hosts", Typeflag: tar.TypeReg, Mode: 0o644, Uid: 1000, Gid: 1000, ModTime: mt, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.user.note": "hi"}},
		{Name: "etc/link", Typeflag: tar.TypeLink, Linkname: "etc/hosts", ModTime: mt, Format: tar.FormatPAX},
		{Name: "etc/wh", Typeflag: tar.TypeChar, Mode: 0, ModTime: mt, Format: tar.FormatPAX},
		{Name: "etc/sym", Typeflag: tar.TypeSymlink, Linkname: "hosts", ModTime: mt, Format: tar.FormatPAX},
	}, map[string]string{"etc/hosts": "127.0.0.1 localhost\n"})

	mustRun(t, "create", "--size", "64M", vol)
	if out, code := run(t, "create", "--size", "64M", vol); code == 0 || !strings.Contains(out, "--force") {
		t.Errorf("create over an existing file: exit %d, %q", code, out)
	}
	mustRun(t, "import", vol, src)
	if got := mustRun(t, "cat", vol, "/etc/hosts"); got != "127.0.0.1 localhost\n" {
		t.Errorf("cat = %q", got)
	}
	ls := mustRun(t, "ls", "-l", vol, "/etc")
	for _, want := range []string{"-rw-r--r-- 2 1000 1000", "c--------- 1    0    0 0, 0", "sym -> hosts", "2023-11-14 22:13:20.123456789"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, ls)
		}
	}
	var entries []struct {
		Path   string            `json:"path"`
		Xattrs map[string][]byte `json:"xattrs"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "ls", "--json", vol, "etc")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 || string(entries[0].Xattrs["user.note"]) != "hi" {
		t.Errorf("ls --json = %+v", entries)
	}
	var info struct {
		BlockSize int  `json:"block_size"`
		Clean     bool `json:"clean"`
		Inodes    int  `json:"inodes"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", vol)), &info); err != nil {
		t.Fatal(err)
	}
	if info.BlockSize != 4096 || !info.Clean || info.Inodes == 0 {
		t.Errorf("info = %+v", info)
	}
	if out := mustRun(t, "fsck", vol); !strings.Contains(out, "clean") {
		t.Errorf("fsck: %s", out)
	}

	// Export and import again elsewhere: the same listing.
	exp := filepath.Join(dir, "out.tar")
	mustRun(t, "export", vol, exp)
	vol2 := filepath.Join(dir, "v2.ext4")
	mustRun(t, "create", "--size", "64M", "--from", exp, vol2)
	if a, b := mustRun(t, "ls", "-l", vol, "etc"), mustRun(t, "ls", "-l", vol2, "etc"); a != b {
		t.Errorf("export/import changed the tree:\n%s\nvs\n%s", a, b)
	}
}

func TestVolumeVerbErrors(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "v.ext4")
	mustRun(t, "create", "--size", "64M", vol)
	evil := filepath.Join(dir, "evil.tar")
	writeTar(t, evil, []*tar.Header{
		{Name: "ok", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
	}, nil)
	out, code := run(t, "import", vol, evil)
	if code == 0 || !strings.Contains(out, "../escape") {
		t.Errorf("import of an escaping entry: exit %d, %q", code, out)
	}
	if out := mustRun(t, "fsck", vol); !strings.Contains(out, "clean") {
		t.Errorf("volume not clean after a refused import: %s", out)
	}
	notExt4 := filepath.Join(dir, "plain")
	os.WriteFile(notExt4, bytes.Repeat([]byte("x"), 8192), 0o644)
	if out, code := run(t, "ls", notExt4); code == 0 || !strings.Contains(out, "not an ext4 volume") {
		t.Errorf("ls of a non-volume: exit %d, %q", code, out)
	}
	if _, code := run(t, "fsck", notExt4); code != 8 {
		t.Errorf("fsck of a non-volume: exit %d, want 8", code)
	}
	// A bad --size is a usage error: exit 2, as --help says.
	for _, size := range []string{"lots", "8X"} {
		if out, code := run(t, "create", "--size", size, filepath.Join(dir, "new.ext4")); code != 2 || !strings.Contains(out, "invalid size") || !strings.Contains(out, "usage:") {
			t.Errorf("--size %s: exit %d, %q; want 2 with the usage", size, code, out)
		}
	}
}

// TestInfoTruncated: info of a volume whose file was cut short says so
// (text and --json: truncated, not clean) and fsck fails. Before, info
// printed "state: clean" and the file's size beside the filesystem's
// block count.
func TestInfoTruncated(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "v.ext4")
	mustRun(t, "create", "--size", "64M", vol)
	if err := os.Truncate(vol, 40<<20); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "info", vol)
	for _, want := range []string{"size:        64.0MiB", "state:       truncated: the file holds 40.0MiB of the filesystem's 64.0MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	var info struct {
		Clean     bool `json:"clean"`
		Truncated bool `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", vol)), &info); err != nil {
		t.Fatal(err)
	}
	if info.Clean || !info.Truncated {
		t.Errorf("info --json: %+v, want truncated and not clean", info)
	}
	if out, code := run(t, "fsck", vol); code == 0 || !strings.Contains(out, "device is shorter") {
		t.Errorf("fsck of a truncated volume: exit %d\n%s", code, out)
	}
}
