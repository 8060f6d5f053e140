package overlay

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

func wh(name string) entry { return file(name, "") }

// lower is the layer most tests apply onto.
func lower(t *testing.T) []byte {
	return tarOf(t,
		dir("a"), file("a/keep", "k"), file("a/gone", "g"), dir("a/sub"), file("a/sub/deep", "d"),
		dir("o"), file("o/lower1", "1"), dir("o/d"), file("o/d/lower2", "2"), file("o/same", "lower"),
		dir("t"), file("t/file2dir", "f"), dir("t/dir2file"), file("t/dir2file/x", "x"), symlink("t/link2dir", "/"),
		file("shared", "s"),
	)
}

func TestApplyLayer(t *testing.T) {
	cases := []struct {
		name  string
		upper []byte
		want  map[string]string
	}{
		{"whiteout", tarOf(t, dir("a"), wh("a/.wh.gone"), wh("a/.wh.sub"), wh(".wh.nothing-there"), wh("missing/.wh.x")),
			map[string]string{"a/keep": "k", "a/gone": "<none>", "a/sub": "<none>", "a/sub/deep": "<none>", "missing": "<none>"}},
		{"whiteout-after-same-layer-entry", tarOf(t, file("a/gone", "new"), wh("a/.wh.gone")),
			map[string]string{"a/gone": "new"}},
		{"whiteout-before-same-layer-entry", tarOf(t, wh("a/.wh.gone"), file("a/gone", "new")),
			map[string]string{"a/gone": "new"}},
		{"opaque-first", tarOf(t, dir("o"), wh("o/.wh..wh..opq"), file("o/new", "n"), dir("o/d"), file("o/d/new2", "n2")),
			map[string]string{"o/new": "n", "o/lower1": "<none>", "o/d/lower2": "<none>", "o/d/new2": "n2", "o/same": "<none>", "a/keep": "k"}},
		{"opaque-last", tarOf(t, dir("o"), file("o/new", "n"), dir("o/d"), file("o/d/new2", "n2"), file("o/same", "upper"), wh("o/.wh..wh..opq")),
			map[string]string{"o/new": "n", "o/lower1": "<none>", "o/d/lower2": "<none>", "o/d/new2": "n2", "o/same": "upper"}},
		{"opaque-new-dir", tarOf(t, dir("fresh"), wh("fresh/.wh..wh..opq"), file("fresh/x", "x")),
			map[string]string{"fresh/x": "x", "o/lower1": "1"}},
		{"replace-types", tarOf(t, dir("t"), dir("t/file2dir"), file("t/file2dir/in", "i"), file("t/dir2file", "now file"),
			dir("t/link2dir"), file("t/link2dir/in", "j")),
			map[string]string{"t/file2dir/in": "i", "t/dir2file": "now file", "t/dir2file/x": "<none>", "t/link2dir": "<dir>", "t/link2dir/in": "j"}},
		{"hard-links", tarOf(t, file("n1", "new"), hardlink("n2", "n1"), hardlink("n3", "shared")),
			map[string]string{"n2": "new", "n3": "s"}},
		{"whiteout-then-refill", tarOf(t, wh(".wh.a"), dir("a"), file("a/new", "n"), file("a/sub/x", "x")),
			map[string]string{"a/new": "n", "a/keep": "<none>", "a/sub/deep": "<none>", "a/sub/x": "x"}},
		{"refill-then-whiteout", tarOf(t, dir("a"), file("a/new", "n"), file("a/sub/x", "x"), wh(".wh.a")),
			map[string]string{"a/new": "n", "a/keep": "<none>", "a/sub/deep": "<none>", "a/sub/x": "x"}},
		{"whiteout-then-implicit-refill", tarOf(t, wh(".wh.a"), file("a/new", "n")),
			map[string]string{"a/new": "n", "a/keep": "<none>"}},
		{"dir-merge", tarOf(t, dir("a"), file("a/added", "+")),
			map[string]string{"a/keep": "k", "a/added": "+", "a/sub/deep": "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := sinktest.NewMemFS()
			if err := Flatten(m, bytes.NewReader(lower(t)), bytes.NewReader(tc.upper)); err != nil {
				t.Fatal(err)
			}
			for p, want := range tc.want {
				if got := content(t, m, p); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			// No whiteout entry is ever materialised when flattening.
			var walk func(p string)
			walk = func(p string) {
				names, _ := m.ReadDir(p)
				for _, n := range names {
					if len(n) >= 4 && n[:4] == ".wh." {
						t.Errorf("%s/%s materialised", p, n)
					}
					walk(joinPath(p, n))
				}
			}
			walk(".")
		})
	}
}

func TestApplyLayerDirMetadata(t *testing.T) {
	t1, t2 := time.Unix(1000, 1), time.Unix(2000, 2)
	l1 := tarOf(t, entry{h: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: t1, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"SCHILY.xattr.user.l1": "1"}}},
		entry{h: tar.Header{Name: "e/", Typeflag: tar.TypeDir, Mode: 0o711, ModTime: t1, Format: tar.FormatPAX}},
		file("e/x", "x"))
	l2 := tarOf(t, entry{h: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: t2, Format: tar.FormatPAX}},
		file("e/y", "y"), wh("e/.wh.x"))
	m := sinktest.NewMemFS()
	if err := Flatten(m, bytes.NewReader(l1), bytes.NewReader(l2)); err != nil {
		t.Fatal(err)
	}
	if h, _ := m.Lstat("d"); h.Mode != sink.TypeDir|0o755 || !h.Mtime.Equal(t2) || len(h.Xattrs) != 0 {
		t.Errorf("d: mode %o mtime %v xattrs %q: want the upper layer's", h.Mode, h.Mtime, h.Xattrs)
	}
	if h, _ := m.Lstat("e"); h.Mode != sink.TypeDir|0o711 || !h.Mtime.Equal(t1) {
		t.Errorf("e: mode %o mtime %v: want the lower layer's", h.Mode, h.Mtime)
	}
}

func TestWriteLayerOverlayFS(t *testing.T) {
	upper := tarOf(t, dir("a"), entry{h: tar.Header{Name: "a/.wh.gone", Uid: 7, Gid: 8}}, dir("o"), wh("o/.wh..wh..opq"), file("o/x", "x"),
		file("same", "kept"), wh(".wh.same"), wh("missing-parent/.wh.x"))
	for _, user := range []bool{false, true} {
		m := sinktest.NewMemFS()
		if err := WriteLayerOverlayFS(m, bytes.NewReader(upper), LayerOptions{UserXattr: user}); err != nil {
			t.Fatal(err)
		}
		h, err := m.Lstat("a/gone")
		if err != nil || h.Type() != sink.TypeChar || h.Devmajor != 0 || h.Devminor != 0 || h.UID != 7 || h.GID != 8 {
			t.Errorf("a/gone: %+v %v, want a char 0:0 whiteout owned by 7:8", h, err)
		}
		key, other := OpaqueXattr, UserOpaqueXattr
		if user {
			key, other = other, key
		}
		h, _ = m.Lstat("o")
		if string(h.Xattrs[key]) != "y" || h.Xattrs[other] != nil {
			t.Errorf("o: xattrs %q, want %s=y", h.Xattrs, key)
		}
		if content(t, m, "o/x") != "x" || content(t, m, "same") != "kept" || content(t, m, "missing-parent/x") != "<whiteout>" {
			t.Errorf("layer contents wrong")
		}
		if names, _ := m.ReadDir("o"); len(names) != 1 {
			t.Errorf("o holds %q", names)
		}
	}
}

func TestLayerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		tar  []byte
		want error
	}{
		{"wh-dotdot", tarOf(t, wh("a/.wh..."), wh(".wh.."+".")), ErrCorrupt},
		{"wh-dotdot-path", tarOf(t, wh("../.wh.x")), ErrUnsafePath},
		{"wh-through-symlink", tarOf(t, symlink("l", "/etc"), wh("l/.wh.passwd")), sink.ErrSymlinkInPath},
		{"opaque-through-symlink", tarOf(t, symlink("l", "/etc"), wh("l/.wh..wh..opq")), sink.ErrSymlinkInPath},
		{"wh-empty", tarOf(t, wh("a/.wh.")), ErrCorrupt},
	} {
		for _, apply := range []func(sink.Sink, []byte) error{
			func(s sink.Sink, b []byte) error { return ApplyLayer(s, bytes.NewReader(b), LayerOptions{}) },
			func(s sink.Sink, b []byte) error { return WriteLayerOverlayFS(s, bytes.NewReader(b), LayerOptions{}) },
		} {
			if err := apply(sinktest.NewMemFS(), tc.tar); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
	}
}

// TestWhiteoutAndRefillOverlayForm: a layer that whites out a lower
// directory and fills it again, in either order, writes an opaque
// directory in overlay form, never a whiteout with entries under it.
func TestWhiteoutAndRefillOverlayForm(t *testing.T) {
	for name, l := range map[string][]byte{
		"whiteout-first":     tarOf(t, wh(".wh.a"), dir("a"), file("a/new", "n")),
		"whiteout-last":      tarOf(t, dir("a"), file("a/new", "n"), wh(".wh.a")),
		"implicit-parent":    tarOf(t, wh(".wh.a"), file("a/new", "n")),
		"file-over-whiteout": tarOf(t, wh(".wh.a"), file("a", "f")),
	} {
		m := sinktest.NewMemFS()
		if err := WriteLayerOverlayFS(m, bytes.NewReader(l), LayerOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h, err := m.Lstat("a")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "file-over-whiteout" {
			if h.Type() != sink.TypeReg || h.Xattrs != nil {
				t.Errorf("%s: a is %o %q", name, h.Mode, h.Xattrs)
			}
			continue
		}
		if h.Type() != sink.TypeDir || string(h.Xattrs[OpaqueXattr]) != "y" {
			t.Errorf("%s: a is %o with xattrs %q, want an opaque directory", name, h.Mode, h.Xattrs)
		}
		if content(t, m, "a/new") != "n" {
			t.Errorf("%s: a/new lost", name)
		}
	}
}
