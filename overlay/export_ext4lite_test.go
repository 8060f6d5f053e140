package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/ext4lite/ext4test"
	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// TestExportSparseExt4liteHugeSize: a file of the largest size ext4 allows
// (16 TiB - 4 KiB, what e2fsck -fy can leave) with two data blocks exports
// from an ext4lite volume in a moment, as a sparse entry whose map is the
// file's extents: the exporter asks the volume where the data is
// (sink.DataMapper) and seeks over the holes. Before, scanRegions read
// every byte of the 16 TiB looking for data and the export never finished.
func TestExportSparseExt4liteHugeSize(t *testing.T) {
	v, err := ext4lite.Create(filepath.Join(t.TempDir(), "v.ext4"), 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ino, err := v.CreateAt(ext4lite.RootIno, "huge", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	blk := bytes.Repeat([]byte("A"), 4096)
	const far = 1 << 40
	for _, off := range []int64{0, far} {
		if _, err := v.WriteAtIno(ino, blk, off); err != nil {
			t.Fatal(err)
		}
	}
	size := int64(1<<32-1) * 4096
	if err := v.SetAttrIno(ino, ext4lite.SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- ExportTar(&buf, v, ExportOptions{}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("export of a 16 TiB sparse file did not finish in 30 s")
	}
	if buf.Len() > 1<<20 {
		t.Fatalf("archive of %d bytes", buf.Len())
	}
	sparseMap := "3\n0\n4096\n" + strconv.Itoa(far) + "\n4096\n" + strconv.FormatInt(size, 10) + "\n0\n"
	if !bytes.Contains(buf.Bytes(), []byte(sparseMap)) {
		t.Errorf("archive lacks the sparse map %q", sparseMap)
	}
	if n := bytes.Count(buf.Bytes(), blk); n != 2 {
		t.Errorf("archive holds the data block %d times, want 2", n)
	}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatal("archive/tar found no entry huge of the file's size")
		}
		if h.Name == "huge" && h.Size == size {
			break
		}
	}
}

// TestExportExt4liteNonUTF8Names: a guest names a directory and a file in
// it with bytes that are not UTF-8 (ext4 allows any but "/" and NUL; so do
// Latin-1 test fixtures) through the inode API, as the volume server does.
// The export holds both under exactly those bytes, and ImportTar brings
// them back. Before, the path API refused such a path (io/fs.ValidPath
// wants UTF-8) and the export of the whole volume failed at that entry.
func TestExportExt4liteNonUTF8Names(t *testing.T) {
	v := newVolume(t)
	d, err := v.CreateAt(ext4lite.RootIno, "caf\xe9", &sink.Header{Mode: sink.TypeDir | 0o755})
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.CreateAt(d, "\xff\xfe", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.WriteAtIno(f, []byte("latin-1"), 0); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ExportTar(&buf, v, ExportOptions{SkipRoot: true}); err != nil {
		t.Fatalf("export: %v", err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if want := []string{"caf\xe9/", "caf\xe9/\xff\xfe", "lost+found/"}; !slices.Equal(names, want) {
		t.Fatalf("archive names %q, want %q", names, want)
	}
	w := importedVolume(t, buf.Bytes())
	r, err := w.Open("caf\xe9/\xff\xfe")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, _ := io.ReadAll(r); string(b) != "latin-1" {
		t.Fatalf("imported file holds %q", b)
	}
}

// TestExportExt4liteXattrNameWithEquals: a guest sets an xattr whose name
// holds "=" (Linux allows it: setfattr -n user.a=b), which no
// SCHILY.xattr record can carry (a PAX key ends at its first "="). The
// export holds it as bsdtar writes xattrs (LIBARCHIVE.xattr, escaped name,
// base64 value) and ImportTar restores it and its plain neighbour exactly.
// Before, ExportTar refused it and so the export of the whole volume.
func TestExportExt4liteXattrNameWithEquals(t *testing.T) {
	v := newVolume(t)
	f, err := v.CreateAt(ext4lite.RootIno, "f", &sink.Header{Mode: sink.TypeReg | 0o644})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"user.a=b": []byte("v\x00\n=1"), "user.%3D x": []byte("esc"), "user.plain": []byte("p")}
	for k, val := range want {
		if err := v.SetxattrIno(f, k, val); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := ExportTar(&buf, v, ExportOptions{}); err != nil {
		t.Fatalf("export: %v", err)
	}
	w := importedVolume(t, buf.Bytes())
	h, err := w.Lstat("f")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h.Xattrs, want) {
		t.Errorf("xattrs after the round trip: %q, want %q", h.Xattrs, want)
	}
}

// newVolume is a new empty 64 MiB ext4lite volume, closed at the end of t.
func newVolume(t *testing.T) *ext4lite.FS {
	t.Helper()
	v, err := ext4lite.Create(filepath.Join(t.TempDir(), "v.ext4"), 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// importedVolume is a new volume with the archive tarball imported.
func importedVolume(t *testing.T, tarball []byte) *ext4lite.FS {
	t.Helper()
	w := newVolume(t)
	if err := ImportTar(w, bytes.NewReader(tarball), ImportOptions{}); err != nil {
		t.Fatalf("import: %v", err)
	}
	return w
}

// TestExportDeepTreeBounded: a guest nests directories so deep that the
// archive's size grows with the square of the depth (tar spells each
// entry's whole path). Past MaxPath (Linux's PATH_MAX by default) entries
// are an ErrTooLong, or, with TooLong, left out with their subtrees and
// named; the archive then holds only the paths that fit. MaxPath -1 keeps
// everything.
func TestExportDeepTreeBounded(t *testing.T) {
	v, err := ext4lite.Create(filepath.Join(t.TempDir(), "v.ext4"), 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	name := string(bytes.Repeat([]byte("d"), 200))
	ino := ext4lite.RootIno
	const depth = 40 // 40 × 201 bytes: paths up to 8 KiB
	for range depth {
		if ino, err = v.CreateAt(ino, name, &sink.Header{Mode: sink.TypeDir | 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.CreateAt(ino, "leaf", &sink.Header{Mode: sink.TypeReg | 0o644}); err != nil {
		t.Fatal(err)
	}

	if err := ExportTar(io.Discard, v, ExportOptions{}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("export of an 8 KiB-deep path without TooLong: %v, want ErrTooLong", err)
	}
	var buf bytes.Buffer
	var left []string
	if err := ExportTar(&buf, v, ExportOptions{TooLong: func(p string) { left = append(left, p) }}); err != nil {
		t.Fatal(err)
	}
	fit := DefaultMaxPath / (len(name) + 1) // the levels whose path fits
	if len(left) != 1 || len(left[0]) <= DefaultMaxPath || strings.Count(left[0], "/") != fit {
		t.Errorf("left out %d paths (want the first one too long, %d levels deep)", len(left), fit+1)
	}
	n, longest := 0, 0
	for tr := tar.NewReader(&buf); ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		longest = max(longest, len(strings.TrimSuffix(h.Name, "/")))
	}
	if n != 2+fit || longest > DefaultMaxPath { // the root, lost+found and the levels that fit
		t.Errorf("archive holds %d entries, the longest path %d bytes; want %d entries of at most %d", n, longest, 2+fit, DefaultMaxPath)
	}

	buf.Reset()
	if err := ExportTar(&buf, v, ExportOptions{MaxPath: -1}); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("leaf")); n == 0 {
		t.Error("MaxPath -1 left the deepest file out")
	}
}

// capBuffer fails writes past max bytes, so an export that does not stop
// fails its test quickly instead of filling memory.
type capBuffer struct {
	bytes.Buffer
	max int
}

var errCapped = errors.New("export wrote past the test's cap")

func (c *capBuffer) Write(p []byte) (int, error) {
	if c.Len()+len(p) > c.max {
		return 0, errCapped
	}
	return c.Buffer.Write(p)
}

// linkedWant is what exporting a LinkedDirs volume must give: the
// warnings (second path → first path) and the archive's entries.
func linkedWant(shape string) (warn [][2]string, names []string) {
	switch shape {
	case ext4test.LinkCycle:
		return [][2]string{{"a/b/root", "."}, {"a/b/up", "a"}},
			[]string{"./", "a/", "a/b/", "a/f", "lost+found/"}
	}
	names = []string{"./", "lost+found/"}
	p := ""
	for i := 1; i <= ext4test.DAGDepth; i++ {
		p += "n" + strconv.Itoa(i)
		names = append(names, p+"/")
		warn = append([][2]string{{p + "b", p}}, warn...) // met on the way back up
		p += "/"
	}
	return warn, append(names, p+"f")
}

// TestExportLinkedDirsExt4 exports volumes that debugfs gave hard links to
// directories (the recipe: link a a/b/up; link / a/b/root; and 40
// nested directories each named twice, 2^40 paths without a cycle).
// MaxPath bounded only the depth: the cycle made 2.8 GB in 120 s and went
// on, the DAG 850 MB in 10 s. Each directory is now exported once: with
// Linked set the second names are warnings and the archive holds the tree
// once; without, the export stops with a *sink.DirLinkError naming the
// path and the inode.
func TestExportLinkedDirsExt4(t *testing.T) {
	for _, shape := range []string{ext4test.LinkCycle, ext4test.LinkDAG} {
		t.Run(shape, func(t *testing.T) {
			img, err := ext4test.LinkedDirs(t.TempDir(), shape)
			if errors.Is(err, ext4test.ErrNoTools) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := ext4lite.Open(img, &ext4lite.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			wantWarn, wantNames := linkedWant(shape)

			buf := &capBuffer{max: 8 << 20}
			var warn [][2]string
			done := make(chan error, 1)
			go func() {
				done <- ExportTar(buf, v, ExportOptions{Linked: func(p, first string) { warn = append(warn, [2]string{p, first}) }})
			}()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("export did not end in 60 s")
			}
			if err != nil {
				t.Fatalf("ExportTar = %v", err)
			}
			if !slices.Equal(warn, wantWarn) {
				t.Errorf("Linked got %q, want %q", warn, wantWarn)
			}
			var names []string
			tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, h.Name)
			}
			if !slices.Equal(names, wantNames) {
				t.Errorf("archive holds %q, want %q", names, wantNames)
			}
			t.Logf("%d-byte archive, %d entries, %d warnings", buf.Len(), len(names), len(warn))

			err = ExportTar(&capBuffer{max: 8 << 20}, v, ExportOptions{})
			var de *sink.DirLinkError
			if !errors.As(err, &de) || !errors.Is(err, sink.ErrDirLinked) {
				t.Fatalf("ExportTar without Linked = %v, want a *sink.DirLinkError", err)
			}
			if w := wantWarn[0]; de.Path != w[0] || de.First != w[1] || de.Ino == 0 {
				t.Errorf("DirLinkError = %+v, want %s again at %s", *de, w[1], w[0])
			}
			t.Log(err)
		})
	}
}

// TestExportLinkedDirs is TestExportLinkedDirsExt4 without e2fsprogs: a
// source whose a/up is the root, and one with 2^40 paths through 41
// directories. Each directory is exported once.
func TestExportLinkedDirs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   *sinktest.Linked
		warns int
		names int
	}{
		{"cycle", sinktest.LinkedCycle(), 1, 3}, // ., a, a/f
		{"dag", sinktest.LinkedDAG(40), 40, 42}, // ., 40 directories, f
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := &capBuffer{max: 8 << 20}
			warns := 0
			err := ExportTar(buf, tc.src, ExportOptions{Linked: func(string, string) { warns++ }})
			if err != nil {
				t.Fatalf("ExportTar = %v", err)
			}
			n := 0
			for tr := tar.NewReader(&buf.Buffer); ; n++ {
				if _, err := tr.Next(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if warns != tc.warns || n != tc.names {
				t.Errorf("%d warnings, %d entries; want %d, %d", warns, n, tc.warns, tc.names)
			}
		})
	}
}
