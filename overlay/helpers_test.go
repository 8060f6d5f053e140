package overlay

import (
	"archive/tar"
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/sinktest"
)

// testTree is EdgeTree plus a RandomTree without sockets (tar cannot hold
// them).
func testTree(t testing.TB, seed uint64, o sinktest.TreeOptions) *sinktest.MemFS {
	t.Helper()
	m := sinktest.NewMemFS()
	if err := sinktest.EdgeTree(m, o); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveAll("dev/socket"); err != nil {
		t.Fatal(err)
	}
	if err := m.Mkdir(&sink.Header{Path: "random", Mode: sink.TypeDir | 0o755}); err != nil {
		t.Fatal(err)
	}
	r := sinktest.NewMemFS()
	if err := sinktest.RandomTree(r, rand.New(rand.NewPCG(seed, 1)), o); err != nil {
		t.Fatal(err)
	}
	removeType(t, r, ".", sink.TypeSocket)
	// Graft r under random/ by exporting and importing: also a test.
	var buf bytes.Buffer
	if err := ExportTar(&buf, r, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ImportTar(m, &buf, ImportOptions{Dest: "random"}); err != nil {
		t.Fatal(err)
	}
	// Importing changed the root's metadata: set it again.
	if err := m.Mkdir(&sink.Header{Path: ".", Mode: sink.TypeDir | 0o755, Mtime: time.Unix(1700000000, 5)}); err != nil {
		t.Fatal(err)
	}
	return m
}

func removeType(t testing.TB, m *sinktest.MemFS, p string, typ uint32) {
	names, err := m.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		c := joinPath(p, n)
		h, _ := m.Lstat(c)
		switch h.Type() {
		case typ:
			m.RemoveAll(c)
		case sink.TypeDir:
			removeType(t, m, c, typ)
		}
	}
}

// tarOf builds an archive from headers and bodies.
type entry struct {
	h    tar.Header
	body string
}

func tarOf(t testing.TB, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.h
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dir(name string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}
func file(name, body string) entry { return entry{h: tar.Header{Name: name}, body: body} }
func symlink(name, target string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}
func hardlink(name, target string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}

// content returns a file's bytes, or "<type>" for non-files, "<none>".
func content(t testing.TB, s sink.Source, p string) string {
	t.Helper()
	h, err := s.Lstat(p)
	if err != nil {
		return "<none>"
	}
	switch h.Type() {
	case sink.TypeReg:
		r, err := s.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var b bytes.Buffer
		b.ReadFrom(r)
		return b.String()
	case sink.TypeDir:
		return "<dir>"
	case sink.TypeSymlink:
		return "<symlink " + h.Linkname + ">"
	case sink.TypeChar:
		if h.Devmajor == 0 && h.Devminor == 0 {
			return "<whiteout>"
		}
	}
	return "<special>"
}
