package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

func TestTarRoundTripMemFS(t *testing.T) {
	for _, c := range []Compression{Uncompressed, Gzip, Zstd} {
		for seed := uint64(1); seed <= 2; seed++ {
			src := testTree(t, seed, sinktest.TreeOptions{})
			var buf bytes.Buffer
			if err := ExportTar(&buf, src, ExportOptions{Compression: c}); err != nil {
				t.Fatal(err)
			}
			dst := sinktest.NewMemFS()
			if err := ImportTar(dst, bytes.NewReader(buf.Bytes()), ImportOptions{}); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if err := sinktest.Compare(src, dst, sinktest.CompareOptions{}); err != nil {
				t.Errorf("%s seed %d: %v", c, seed, err)
			}
			// Deterministic: the same tree makes the same bytes.
			var again bytes.Buffer
			if err := ExportTar(&again, dst, ExportOptions{Compression: c}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Errorf("%s seed %d: export of the imported tree differs", c, seed)
			}
		}
	}
}

func TestExportSockets(t *testing.T) {
	m := sinktest.NewMemFS()
	m.Mknod(&sink.Header{Path: "s", Mode: sink.TypeSocket | 0o755})
	var buf bytes.Buffer
	if err := ExportTar(&buf, m, ExportOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("socket: %v, want ErrUnsupported", err)
	}
	buf.Reset()
	if err := ExportTar(&buf, m, ExportOptions{SkipSockets: true}); err != nil {
		t.Fatal(err)
	}
}

func TestImportTarNames(t *testing.T) {
	m := sinktest.NewMemFS()
	data := tarOf(t,
		file("/abs", "a"),
		file("//double//slash", "b"),
		file("./dotted/./name", "c"),
		dir("./"),
	)
	if err := ImportTar(m, bytes.NewReader(data), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"abs": "a", "double/slash": "b", "dotted/name": "c", "dotted": "<dir>"} {
		if got := content(t, m, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

func TestImportTarDest(t *testing.T) {
	m := sinktest.NewMemFS()
	data := tarOf(t, dir("./"), file("a/b", "x"), symlink("l", "/etc"), hardlink("h", "a/b"))
	if err := ImportTar(m, bytes.NewReader(data), ImportOptions{Dest: "sub/dir"}); err != nil {
		t.Fatal(err)
	}
	if got := content(t, m, "sub/dir/h"); got != "x" {
		t.Errorf("hard link under Dest: %q", got)
	}
	if got := content(t, m, "sub/dir/l"); got != "<symlink /etc>" {
		t.Errorf("symlink under Dest: %q", got)
	}
	if names, _ := m.ReadDir("."); len(names) != 1 {
		t.Errorf("wrote outside Dest: %q", names)
	}
	if err := ImportTar(m, bytes.NewReader(data), ImportOptions{Dest: "../x"}); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("Dest with ..: %v", err)
	}
}

func TestImportTarRefusals(t *testing.T) {
	trunc := tarOf(t, file("ok", "fine"), file("cut", strings.Repeat("x", 5000)))
	trunc = trunc[:512+512+512+1000]
	cases := []struct {
		name  string
		data  []byte
		want  error
		entry string
	}{
		{"dotdot", tarOf(t, file("a/../../etc/passwd", "x")), ErrUnsafePath, "a/../../etc/passwd"},
		{"dotdot-link-target", tarOf(t, file("a", "x"), hardlink("b", "../a")), ErrUnsafePath, "b"},
		{"missing-link", tarOf(t, hardlink("b", "nowhere")), ErrCorrupt, "b"},
		{"link-to-dir", tarOf(t, dir("d"), hardlink("b", "d")), ErrCorrupt, "b"},
		{"through-symlink", tarOf(t, symlink("l", "/tmp"), file("l/evil", "x")), sink.ErrSymlinkInPath, "l/evil"},
		{"through-symlink-deep", tarOf(t, dir("d"), symlink("d/l", "../.."), file("d/l/x/evil", "x")), sink.ErrSymlinkInPath, "d/l/x/evil"},
		{"under-file", tarOf(t, file("f", "x"), file("f/g", "y")), ErrCorrupt, "f/g"},
		{"truncated", trunc, ErrCorrupt, "cut"},
		{"unknown-type", tarOf(t, entry{h: tar.Header{Name: "z", Typeflag: 'Z'}}), ErrUnsupported, "z"},
		{"root-file", tarOf(t, file(".", "")), ErrCorrupt, "."},
		{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 1, 2}, ErrUnsupported, ""},
		{"garbage", bytes.Repeat([]byte{'g'}, 1024), ErrCorrupt, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := sinktest.NewMemFS()
			err := ImportTar(m, bytes.NewReader(tc.data), ImportOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var ee *EntryError
			if !errors.As(err, &ee) || ee.Name != tc.entry {
				t.Fatalf("err = %v, want it to name entry %q", err, tc.entry)
			}
			if tc.entry != "" && !strings.Contains(err.Error(), tc.entry) {
				t.Errorf("message %q lacks the entry name", err)
			}
		})
	}
}

func TestImportTarReplaces(t *testing.T) {
	m := sinktest.NewMemFS()
	data := tarOf(t,
		dir("d"), file("d/x", "1"),
		file("d", "now a file"),                    // replaces the directory
		file("f", "1"), dir("f"), file("f/y", "2"), // file replaced by a directory
		file("g", "old"), file("g", "new"),
	)
	if err := ImportTar(m, bytes.NewReader(data), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"d": "now a file", "f/y": "2", "g": "new", "d/x": "<none>"} {
		if got := content(t, m, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

func TestImportTarMetadata(t *testing.T) {
	mt := time.Unix(1600000000, 123456789)
	at := time.Unix(1600000001, 5)
	ct := time.Unix(1600000002, 7)
	data := tarOf(t,
		entry{h: tar.Header{Name: "ro/", Typeflag: tar.TypeDir, Mode: 0o1555, ModTime: mt, Format: tar.FormatPAX}},
		entry{h: tar.Header{Name: "ro/f", Mode: 0o4755, Uid: 1 << 20, Gid: 70000, ModTime: mt, AccessTime: at, ChangeTime: ct, Format: tar.FormatPAX,
			PAXRecords: map[string]string{
				"SCHILY.xattr.user.a":                "va",
				"SCHILY.xattr.security.capability":   "\x01\x00\x00\x02",
				"LIBARCHIVE.xattr.user.b%3Dc":        "dmI=", // base64("vb"), name "user.b=c"
				"LIBARCHIVE.xattr.trusted.overlay.x": "eQ",   // unpadded base64("y")
				"LIBARCHIVE.creationtime":            "1500000000.5",
			}}, body: "data"},
		entry{h: tar.Header{Name: "ro/c", Typeflag: tar.TypeChar, Devmajor: 4095, Devminor: 1<<20 - 1}},
		entry{h: tar.Header{Name: "ro/b", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 1}},
		entry{h: tar.Header{Name: "ro/p", Typeflag: tar.TypeFifo}},
		entry{h: tar.Header{Name: "ro/ustar", ModTime: time.Unix(5, 0), Format: tar.FormatUSTAR}},
	)
	m := sinktest.NewMemFS()
	if err := ImportTar(m, bytes.NewReader(data), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	h, _ := m.Lstat("ro/f")
	if h.Mode != sink.TypeReg|0o4755 || h.UID != 1<<20 || h.GID != 70000 || !h.Mtime.Equal(mt) || !h.Atime.Equal(at) || !h.Ctime.Equal(ct) ||
		!h.Crtime.Equal(time.Unix(1500000000, 5e8)) {
		t.Errorf("ro/f: %+v", h)
	}
	want := map[string]string{"user.a": "va", "security.capability": "\x01\x00\x00\x02", "user.b=c": "vb", "trusted.overlay.x": "y"}
	if len(h.Xattrs) != len(want) {
		t.Errorf("xattrs %q, want %q", h.Xattrs, want)
	}
	for k, v := range want {
		if string(h.Xattrs[k]) != v {
			t.Errorf("xattr %s = %q, want %q", k, h.Xattrs[k], v)
		}
	}
	if h, _ := m.Lstat("ro"); h.Mode != sink.TypeDir|0o1555 || !h.Mtime.Equal(mt) {
		t.Errorf("ro: %o %v", h.Mode, h.Mtime)
	}
	if h, _ := m.Lstat("ro/c"); h.Type() != sink.TypeChar || h.Devmajor != 4095 || h.Devminor != 1<<20-1 {
		t.Errorf("ro/c: %+v", h)
	}
	if h, _ := m.Lstat("ro/b"); h.Type() != sink.TypeBlock || h.Devmajor != 8 {
		t.Errorf("ro/b: %+v", h)
	}
	if h, _ := m.Lstat("ro/ustar"); !h.Atime.Equal(time.Unix(5, 0)) {
		t.Errorf("ro/ustar: atime %v, want the mtime", h.Atime)
	}
}

func TestImportTarMaxFileSize(t *testing.T) {
	data := tarOf(t, file("big", strings.Repeat("x", 2000)))
	err := ImportTar(sinktest.NewMemFS(), bytes.NewReader(data), ImportOptions{MaxFileSize: 1000})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

// TestWhiteoutNamesArePlainInImport: ImportTar is not a layer walker.
func TestWhiteoutNamesArePlainInImport(t *testing.T) {
	m := sinktest.NewMemFS()
	if err := ImportTar(m, bytes.NewReader(tarOf(t, file(".wh.x", "1"), file(".wh..wh..opq", "2"))), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if content(t, m, ".wh.x") != "1" || content(t, m, ".wh..wh..opq") != "2" {
		t.Error("whiteout-named files not kept as files")
	}
}

// TestExportSparse: a file with data past 5 GiB exports as a small GNU
// sparse entry and imports back equal, holes kept.
func TestExportSparse(t *testing.T) {
	src := sinktest.NewMemFS()
	if err := sinktest.EdgeTree(src, sinktest.TreeOptions{HugeSparse: true}); err != nil {
		t.Fatal(err)
	}
	src.RemoveAll("dev/socket")
	var buf bytes.Buffer
	if err := ExportTar(&buf, src, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 8<<20 {
		t.Fatalf("archive of %d bytes: sparse file written in full", buf.Len())
	}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	found := false
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "sparse/past-5GiB" {
			found = h.Size == 5<<30+3*4096+17
		}
	}
	if !found {
		t.Fatal("archive/tar does not read the sparse entry back with its real name and size")
	}
	dst := sinktest.NewMemFS()
	if err := ImportTar(dst, bytes.NewReader(buf.Bytes()), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sinktest.Compare(src, dst, sinktest.CompareOptions{}); err != nil {
		t.Fatal(err)
	}
	if dst.DataBytes() > 4<<20 {
		t.Errorf("import holds %d bytes", dst.DataBytes())
	}
	var plain countWriter
	if err := ExportTar(&plain, src, ExportOptions{NoSparse: true}); err != nil {
		t.Fatal(err)
	}
	if plain.n < 5<<30 {
		t.Errorf("NoSparse archive of %d bytes", plain.n)
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func TestExportCrtime(t *testing.T) {
	m := sinktest.NewMemFS()
	ct := time.Unix(1500000000, 42)
	m.WriteFile(&sink.Header{Path: "f", Mode: sink.TypeReg | 0o644, Crtime: ct}, bytes.NewReader(nil))
	for _, keep := range []bool{false, true} {
		var buf bytes.Buffer
		if err := ExportTar(&buf, m, ExportOptions{Crtime: keep}); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(buf.Bytes(), []byte(paxCrtime)); got != keep {
			t.Errorf("Crtime=%v: record present %v", keep, got)
		}
		back := sinktest.NewMemFS()
		if err := ImportTar(back, &buf, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		h, _ := back.Lstat("f")
		if h.Crtime.Equal(ct) != keep {
			t.Errorf("Crtime=%v: imported crtime %v", keep, h.Crtime)
		}
	}
}

// lstatCounter counts the Lstat calls a walk makes on its sink and
// records the paths it calls Mkdir on.
type lstatCounter struct {
	sink.Sink
	n      int
	mkdirs map[string]bool
}

func (c *lstatCounter) Lstat(p string) (*sink.Header, error) {
	c.n++
	return c.Sink.Lstat(p)
}

func (c *lstatCounter) Mkdir(h *sink.Header) error {
	c.mkdirs[h.Path] = true
	return c.Sink.Mkdir(h)
}

// TestImportIntoNewVolumeRoot: a target whose root holds only a few
// directories (a new ext4lite volume's lost+found, here two more) is known
// whole after one look, so the entries under the root need no lookups; a
// tar entry that replaces such a directory still replaces it, one that
// writes into it leaves its metadata as it was, and one the archive does
// not touch is left alone.
func TestImportIntoNewVolumeRoot(t *testing.T) {
	for _, serial := range []bool{false, true} {
		v, err := ext4lite.Create(filepath.Join(t.TempDir(), "v.ext4"), 64<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		when := time.Unix(1700000000, 5)
		for _, d := range []string{"keep", "untouched"} {
			if err := v.Mkdir(&sink.Header{Path: d, Mode: sink.TypeDir | 0o700, Mtime: when, Atime: when}); err != nil {
				t.Fatal(err)
			}
		}
		c := &lstatCounter{Sink: v, mkdirs: map[string]bool{}}
		es := []entry{file("lost+found", "now a file"), file("keep/x", "x")}
		for i := range 50 {
			es = append(es, file(fmt.Sprintf("f%d", i), "data"))
		}
		w, err := newWalker(c, modeImport, ".", newLimits(0, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		w.serial = serial
		before := c.n
		if err := w.run(bytes.NewReader(tarOf(t, es...))); err != nil {
			t.Fatal(err)
		}
		if c.n-before > 3 {
			t.Errorf("serial=%v: %d Lstat calls for %d entries in the root, want none per entry", serial, c.n-before, len(es))
		}
		if got := content(t, v, "lost+found"); got != "now a file" {
			t.Errorf("serial=%v: lost+found = %q, want the file that replaced the directory", serial, got)
		}
		if got := content(t, v, "keep/x"); got != "x" {
			t.Errorf("serial=%v: keep/x = %q", serial, got)
		}
		h, err := v.Lstat("keep")
		if err != nil {
			t.Fatal(err)
		}
		if !h.Mtime.Equal(when) || h.Mode&sink.ModePerm != 0o700 {
			t.Errorf("serial=%v: keep: mtime %v mode %o, want %v and 0700 kept", serial, h.Mtime, h.Mode&sink.ModePerm, when)
		}
		if c.mkdirs["untouched"] {
			t.Errorf("serial=%v: the walk rewrote the metadata of a directory no entry touches", serial)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
