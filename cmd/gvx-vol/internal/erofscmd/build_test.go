package erofscmd

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"z.gfire.dev/gvx/erofs"
)

func runApp(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "gvx-vol", Commands: []*cli.Command{Command()}, Writer: &out, ErrWriter: &errOut}
	err := app.Run(append([]string{"gvx-vol"}, args...))
	return out.String(), errOut.String(), err
}

func TestBuildFromDir(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "etc", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "etc", "hostname"), []byte("gvx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "img.erofs")
	stdout, _, err := runApp(t, "erofs", "build", "--json", "--profile", "runtime", src, out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Output  string `json:"output"`
		Profile string `json:"profile"`
		Inodes  int64  `json:"inodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if rep.Output != out || rep.Inodes != 4 {
		t.Errorf("report %+v", rep)
	}
	ls, _, err := runApp(t, "erofs", "ls", out, "/etc")
	if err != nil || ls != "deep\nhostname\n" {
		t.Errorf("ls: %q %v", ls, err)
	}
	cat, _, err := runApp(t, "erofs", "cat", out, "etc/hostname")
	if err != nil || cat != "gvx\n" {
		t.Errorf("cat: %q %v", cat, err)
	}
	chk, _, err := runApp(t, "erofs", "check", out)
	if err != nil || !strings.Contains(chk, "clean, 4 inodes") {
		t.Errorf("check: %q %v", chk, err)
	}
	raw, _ := os.ReadFile(out)
	raw[2000] ^= 1
	bad := out + ".bad"
	os.WriteFile(bad, raw, 0o644)
	if _, _, err := runApp(t, "erofs", "check", bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("check of a damaged image: %v", err)
	}
	os.Remove(bad)
	// No temporary file is left beside OUT.
	ents, _ := os.ReadDir(filepath.Dir(out))
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestBuildFromTar(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o600, Size: 5, Uid: 100000, PAXRecords: map[string]string{"SCHILY.xattr.user.k": "v"}},
		{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "f"},
		{Name: "d/h", Typeflag: tar.TypeLink, Linkname: "d/f"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("hello"))
		}
	}
	tw.Close()
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "l.tar")
	os.WriteFile(tarPath, buf.Bytes(), 0o644)
	for _, prof := range []string{"full", "runtime"} {
		out := filepath.Join(dir, prof+".erofs")
		_, stderr, err := runApp(t, "erofs", "build", "--from-tar", "--profile", prof, "-q", tarPath, out)
		if err != nil {
			t.Fatal(err)
		}
		if (prof == "runtime") != strings.Contains(stderr, "dropped xattr user.k") {
			t.Errorf("%s: warnings %q", prof, stderr)
		}
		f, _ := os.Open(out)
		st, _ := f.Stat()
		im, err := erofs.Open(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		h, err := im.Lstat("d/h")
		if err != nil || h.UID != 100000 || h.Nlink != 2 || h.Size != 5 {
			t.Errorf("%s: d/h = %+v, %v", prof, h, err)
		}
		if prof == "full" && string(h.Xattrs["user.k"]) != "v" {
			t.Errorf("xattr lost: %v", h.Xattrs)
		}
		f.Close()
	}
}

func TestBuildUsage(t *testing.T) {
	if _, _, err := runApp(t, "erofs", "build", "onlyone"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("missing OUT: %v", err)
	}
	if _, _, err := runApp(t, "erofs", "build", "--profile", "tiny", "a", "b"); err == nil {
		t.Error("bad profile accepted")
	}
	out := filepath.Join(t.TempDir(), "x.erofs")
	if _, _, err := runApp(t, "erofs", "build", filepath.Join(t.TempDir(), "missing"), out); err == nil {
		t.Error("missing SRC accepted")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("failed build left OUT behind")
	}
}

// TestBuildWorkers: --workers changes nothing in the image, and a bad
// count is a usage error.
func TestBuildWorkers(t *testing.T) {
	src := t.TempDir()
	for i := range 300 {
		d := filepath.Join(src, "d"+strings.Repeat("x", i%7))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"+strings.Repeat("y", i%11)+string(rune('a'+i%26))), bytes.Repeat([]byte{byte(i)}, i*997), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want []byte
	for _, w := range []string{"1", "2", "8"} {
		out := filepath.Join(t.TempDir(), "img.erofs")
		if _, _, err := runApp(t, "erofs", "build", "-q", "--workers", w, src, out); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = raw
		} else if !bytes.Equal(raw, want) {
			t.Errorf("--workers %s: not the image --workers 1 gives", w)
		}
	}
	if _, _, err := runApp(t, "erofs", "build", "--workers", "-1", src, filepath.Join(t.TempDir(), "x.erofs")); err == nil || !strings.Contains(err.Error(), "--workers") {
		t.Errorf("--workers -1: %v", err)
	}
}
