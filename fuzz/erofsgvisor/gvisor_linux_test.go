package erofsgvisor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	gerofs "gvisor.dev/gvisor/pkg/erofs"

	"z.gfire.dev/gvx/erofs"
	"z.gfire.dev/gvx/sink"
)

// seeds returns small images: the builder's runtime and full profiles of a
// tree with each record both readers parse, and mkfs.erofs's image of the
// same tree written to a directory (where mkfs.erofs is installed).
func seeds(t testing.TB) [][]byte {
	var out [][]byte
	fill := func(s sink.Sink) {
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.Mkdir(&sink.Header{Path: "d", Mode: sink.TypeDir | 0o755, UID: 70000}))
		for i := range 40 { // two directory blocks
			must(s.WriteFile(&sink.Header{Path: "d/" + strings.Repeat("n", 90) + string(rune('a'+i%26)) + strings.Repeat("z", i/26), Mode: sink.TypeReg | 0o644, Size: 1}, strings.NewReader("x")))
		}
		must(s.WriteFile(&sink.Header{Path: "d/f", Mode: sink.TypeReg | 0o640, Size: 5000, GID: 9}, bytes.NewReader(bytes.Repeat([]byte("erofs"), 1000))))
		must(s.WriteFile(&sink.Header{Path: "small", Mode: sink.TypeReg | 0o600, Size: 10}, strings.NewReader("0123456789")))
		must(s.Link("small", "hard"))
		must(s.Symlink(&sink.Header{Path: "ln", Mode: sink.TypeSymlink | 0o777, Linkname: "d/f"}))
		must(s.Symlink(&sink.Header{Path: "long", Mode: sink.TypeSymlink | 0o777, Linkname: strings.Repeat("x/", 200)}))
		must(s.Mknod(&sink.Header{Path: "fifo", Mode: sink.TypeFifo | 0o644}))
	}
	for _, prof := range []erofs.Profile{erofs.ProfileRuntime, erofs.ProfileFull} {
		b := erofs.NewBuilder(erofs.Options{Profile: prof})
		fill(b)
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		b.Close()
		out = append(out, buf.Bytes())
	}
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		return out
	}
	dir, err := os.MkdirTemp("", "gvx-erofs-seed-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"d"} {
		os.Mkdir(filepath.Join(dir, "src", d), 0o755)
	}
	os.MkdirAll(filepath.Join(dir, "src", "d"), 0o755)
	for i := range 40 {
		os.WriteFile(filepath.Join(dir, "src", "d", strings.Repeat("n", 90)+string(rune('a'+i%26))+strings.Repeat("z", i/26)), []byte("x"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "src", "d", "f"), bytes.Repeat([]byte("erofs"), 1000), 0o640)
	os.WriteFile(filepath.Join(dir, "src", "small"), []byte("0123456789"), 0o600)
	os.Link(filepath.Join(dir, "src", "small"), filepath.Join(dir, "src", "hard"))
	os.Symlink("d/f", filepath.Join(dir, "src", "ln"))
	img := filepath.Join(dir, "m.erofs")
	cmd := exec.Command("mkfs.erofs", "-x", "-1", "-T", "1700000000", "-U", "6776780a-0000-4000-8000-000000000003", img, filepath.Join(dir, "src"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Logf("mkfs.erofs: %v\n%s (seeding without it)", err, b)
		return out
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, b)
}

// FuzzEROFSGvisor: see the package doc.
func FuzzEROFSGvisor(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, img []byte) { compare(t, dir, img) })
}

// compare runs the differential on img and returns how many entries both
// readers read and agreed on.
func compare(t *testing.T, dir string, img []byte) int {
	ours, err := erofs.Open(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		if !errors.Is(err, erofs.ErrCorrupt) && !errors.Is(err, erofs.ErrUnsupported) {
			t.Fatalf("erofs.Open: %v wraps no sentinel", err)
		}
		return 0
	}
	if _, err := ours.Check(); err != nil {
		return 0 // we call it damaged: nothing the Sentry should mount
	}
	p := filepath.Join(dir, "img.erofs")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gerofs.OpenImage(fh) // takes fh
	if err != nil {
		return 0 // gVisor refuses what it does not support: not a disagreement
	}
	defer g.Close()
	d := &differ{t: t, ours: ours, g: g, budget: 500}
	d.walk(".", g.RootNid())
	return d.agreed
}

// TestSeedsCompared: on every undamaged seed both readers read the whole
// tree and agree, so the harness compares rather than skips.
func TestSeedsCompared(t *testing.T) {
	for i, s := range seeds(t) {
		if n := compare(t, t.TempDir(), s); n < 45 {
			t.Errorf("seed %d: both readers agreed on %d entries, want the whole tree (45+)", i, n)
		}
	}
}

type differ struct {
	t      *testing.T
	ours   *erofs.Image
	g      *gerofs.Image
	budget int
	agreed int
}

// walk compares p (ours) with nid (gVisor's) and recurses into
// directories; where either reader fails, the subtree is skipped.
func (d *differ) walk(p string, nid uint64) {
	if d.budget--; d.budget < 0 {
		return
	}
	h, err := d.ours.Lstat(p)
	if err != nil {
		return
	}
	in, err := d.g.Inode(nid)
	if err != nil {
		return
	}
	t := d.t
	if uint32(in.Mode()) != h.Mode || in.UID() != h.UID || in.GID() != h.GID {
		t.Fatalf("%s: gVisor sees mode %#o owner %d:%d, ours %#o %d:%d", p, in.Mode(), in.UID(), in.GID(), h.Mode, h.UID, h.GID)
	}
	if in.Nlink() != h.Nlink {
		t.Fatalf("%s: gVisor nlink %d, ours %d", p, in.Nlink(), h.Nlink)
	}
	d.agreed++
	switch {
	case in.IsDir():
		names, err := d.ours.ReadDir(p)
		if err != nil {
			return
		}
		var gnames []string
		kids := map[string]uint64{}
		if err := in.IterDirents(func(name string, _ uint8, child uint64) error {
			if name != "." && name != ".." {
				gnames = append(gnames, name)
				kids[name] = child
			}
			return nil
		}); err != nil {
			return
		}
		if strings.Join(names, "/") != strings.Join(gnames, "/") {
			t.Fatalf("%s: gVisor lists %q, ours %q", p, gnames, names)
		}
		for _, n := range names {
			d.walk(path.Join(p, n), kids[n])
		}
	case in.IsRegular():
		if int64(in.Size()) != h.Size {
			t.Fatalf("%s: gVisor size %d, ours %d", p, in.Size(), h.Size)
		}
		ranges, err := in.DataRanges()
		if err != nil {
			return
		}
		var got []byte
		for _, r := range ranges {
			got = append(got, r.Bytes...)
		}
		rc, err := d.ours.Open(p)
		if err != nil {
			return
		}
		want, err := io.ReadAll(io.LimitReader(rc, 1<<20))
		rc.Close()
		if err != nil || len(got) > 1<<20 {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: gVisor reads %d bytes that differ from ours (%d)", p, len(got), len(want))
		}
	case in.IsSymlink():
		target, err := in.Readlink()
		if err == nil && target != h.Linkname {
			t.Fatalf("%s: gVisor reads symlink %.40q, ours %.40q", p, target, h.Linkname)
		}
	}
}
