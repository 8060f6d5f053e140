package overlay

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// layerGen makes an upper layer against the flattened tree below it:
// whiteouts of files and whole directories, opaque directories refilled
// with some of the same names, type replacements, directory metadata
// changes, new files and hard links inside the layer. Every entry's
// ancestors are in the layer too, as image builders write them.
type layerGen struct {
	t      *testing.T
	rng    *rand.Rand
	cur    *sinktest.MemFS // the tree below
	up     *sinktest.MemFS // this layer's regular entries
	wh     []string        // whiteout entry names
	n      int
	newDir map[string]bool
	used   []string // paths ops touched: later ops keep clear of them
}

// free reports whether p is unrelated to every path an earlier op touched,
// and claims it.
func (g *layerGen) free(p string) bool {
	for _, q := range g.used {
		if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") || p == "." {
			return false
		}
	}
	g.used = append(g.used, p)
	return true
}

func (g *layerGen) paths() (files, dirs []string) {
	var walk func(p string)
	walk = func(p string) {
		names, _ := g.cur.ReadDir(p)
		for _, n := range names {
			c := joinPath(p, n)
			h, _ := g.cur.Lstat(c)
			if h.Type() == sink.TypeDir {
				dirs = append(dirs, c)
				walk(c)
			} else {
				files = append(files, c)
			}
		}
	}
	walk(".")
	return
}

// ancestors puts p's parent directories into the upper tree with the
// metadata they have below (or fresh metadata for new ones).
func (g *layerGen) ancestors(p string) {
	if p == "." {
		return
	}
	par := parentOf(p)
	if par == "." {
		return
	}
	g.ancestors(par)
	if h, err := g.up.Lstat(par); err == nil && h.Type() == sink.TypeDir {
		return
	}
	h, err := g.cur.Lstat(par)
	if err != nil || h.Type() != sink.TypeDir || g.newDir[par] {
		h = &sink.Header{Path: par, Mode: sink.TypeDir | 0o755, Mtime: time.Unix(int64(g.rng.IntN(1<<31)), int64(g.rng.IntN(1e9)))}
	}
	h.Path = par
	g.up.RemoveAll(par)
	if err := g.up.Mkdir(h); err != nil {
		g.t.Fatal(err)
	}
}

func (g *layerGen) file(p, body string) {
	g.ancestors(p)
	g.up.RemoveAll(p)
	h := &sink.Header{Path: p, Mode: sink.TypeReg | 0o640, UID: 1000, Size: int64(len(body)),
		Mtime: time.Unix(1600000000+int64(g.n), int64(g.n)), Atime: time.Unix(1600000000, 0)}
	g.n++
	if err := g.up.WriteFile(h, strings.NewReader(body)); err != nil {
		g.t.Fatal(err)
	}
}

func (g *layerGen) dir(p string, mode uint32) {
	g.ancestors(p)
	g.up.RemoveAll(p)
	if err := g.up.Mkdir(&sink.Header{Path: p, Mode: sink.TypeDir | mode, Mtime: time.Unix(1500000000+int64(g.n), 77)}); err != nil {
		g.t.Fatal(err)
	}
	g.n++
}

func (g *layerGen) whiteout(p string) {
	g.ancestors(p)
	g.wh = append(g.wh, joinPath(parentOf(p), ".wh."+baseOf(p)))
}

func (g *layerGen) opaque(d string) {
	g.dir(d, 0o750)
	g.wh = append(g.wh, d+"/.wh..wh..opq")
}

func (g *layerGen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

func (g *layerGen) generate(ops int) {
	g.up = sinktest.NewMemFS()
	g.newDir = map[string]bool{}
	files, dirs := g.paths()
	for i := 0; i < ops && len(files) > 0 && len(dirs) > 0; i++ {
		f, d := g.pick(files), g.pick(dirs)
		op := g.rng.IntN(9)
		target := f
		switch op {
		case 1, 2, 4, 5, 8:
			target = d
		case 6:
			target = joinPath(d, fmt.Sprintf("hl%d", i))
		}
		if !g.free(target) {
			continue
		}
		switch op {
		case 0:
			g.whiteout(f)
		case 1:
			g.whiteout(d)
		case 2:
			g.opaque(d)
			names, _ := g.cur.ReadDir(d)
			if len(names) > 0 {
				g.file(joinPath(d, g.pick(names)), "same name, upper")
			}
			g.file(joinPath(d, fmt.Sprintf("new%d", i)), "new in opaque")
		case 3: // file → dir
			g.dir(f, 0o755)
			g.file(f+"/inside", "was a file")
			g.newDir[f] = true
		case 4: // dir → file
			g.file(d, "was a dir")
		case 5: // dir metadata only
			g.dir(d, uint32(0o700+g.rng.IntN(0o100)))
		case 6: // new file and a hard link to it in another directory
			a := target
			g.file(a, "linked")
			b := joinPath(g.pick(dirs), fmt.Sprintf("hl%d-b", i))
			if !g.free(b) {
				continue
			}
			if h, err := g.up.Lstat(a); err == nil && h.Type() == sink.TypeReg {
				g.ancestors(b)
				g.up.RemoveAll(b)
				if err := g.up.Link(a, b); err != nil {
					g.t.Fatal(err)
				}
			}
		case 8: // whiteout of a lower directory, then filled again
			g.whiteout(d)
			g.dir(d, 0o711)
			g.file(joinPath(d, fmt.Sprintf("refill%d", i)), "refilled")
		case 7: // a symlink where a file was
			g.ancestors(f)
			g.up.RemoveAll(f)
			g.up.Symlink(&sink.Header{Path: f, Mode: sink.TypeSymlink | 0o777, Linkname: "../elsewhere"})
		}
	}
}

// tar writes the layer: regular entries and whiteouts, whiteouts first or
// last.
func (g *layerGen) tar(whFirst bool) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	writeWh := func() {
		for _, w := range g.wh {
			if err := tw.WriteHeader(&tar.Header{Name: w, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
				g.t.Fatal(err)
			}
		}
	}
	if whFirst {
		writeWh()
	}
	e := &exporter{tw: tw, src: g.up, o: ExportOptions{SkipRoot: true}, links: map[uint64]string{}, dirs: sink.DirSet{}}
	if err := e.walk("."); err != nil {
		g.t.Fatal(err)
	}
	if !whFirst {
		writeWh()
	}
	if err := tw.Close(); err != nil {
		g.t.Fatal(err)
	}
	return buf.Bytes()
}

// TestOverlayFSMatchesFlatten is the kernel cross-check: layers written in
// overlay form into host directories and mounted with
// lowerdir=L3:L2:L1 show the same tree as Flatten builds.
func TestOverlayFSMatchesFlatten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount overlayfs and write trusted.overlay.* xattrs")
	}
	if b, _ := os.ReadFile("/proc/filesystems"); !bytes.Contains(b, []byte("\toverlay\n")) {
		if err := exec.Command("modprobe", "overlay").Run(); err != nil {
			t.Skip("kernel has no overlay filesystem")
		}
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			base := testTree(t, seed, sinktest.TreeOptions{Entries: 300})
			// A char 0:0 device in a layer is a whiteout to overlayfs, and
			// overlay.* xattrs are its own: leave both out of the base.
			base.RemoveAll("dev/whiteout")
			base.RemoveAll("xattrs/opaque")
			var l1 bytes.Buffer
			if err := ExportTar(&l1, base, ExportOptions{}); err != nil {
				t.Fatal(err)
			}
			layers := [][]byte{l1.Bytes()}
			cur := sinktest.NewMemFS()
			if err := ApplyLayer(cur, bytes.NewReader(layers[0]), LayerOptions{}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 99))
			for i := 0; i < 2; i++ {
				g := &layerGen{t: t, rng: rng, cur: cur}
				g.generate(25)
				l := g.tar(i == 0)
				layers = append(layers, l)
				if err := ApplyLayer(cur, bytes.NewReader(l), LayerOptions{}); err != nil {
					t.Fatalf("layer %d: %v", i+2, err)
				}
			}
			// Flatten in one go must equal the incremental result.
			flat := sinktest.NewMemFS()
			var rs []*bytes.Reader
			for _, l := range layers {
				rs = append(rs, bytes.NewReader(l))
			}
			if err := Flatten(flat, rs[0], rs[1], rs[2]); err != nil {
				t.Fatal(err)
			}
			if err := sinktest.Compare(cur, flat, sinktest.CompareOptions{}); err != nil {
				t.Fatal(err)
			}

			top := t.TempDir()
			var lower []string
			for i, l := range layers {
				d := filepath.Join(top, fmt.Sprintf("L%d", i+1))
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := WriteLayerOverlayFS(hostdir.New(d), bytes.NewReader(l), LayerOptions{}); err != nil {
					t.Fatalf("L%d: %v", i+1, err)
				}
				lower = append([]string{d}, lower...)
			}
			mnt := filepath.Join(top, "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(lower, ":")); err != nil {
				t.Skipf("mount overlay: %v", err)
			}
			merged := hostdir.New(mnt)
			t.Cleanup(func() {
				merged.Close() // its cached handle would keep the mount busy
				if err := unix.Unmount(mnt, 0); err != nil {
					t.Errorf("unmount %s: %v", mnt, err)
					unix.Unmount(mnt, unix.MNT_DETACH) // never leave it behind
				}
			})
			o := sinktest.CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true,
				IgnoreXattrPrefixes: []string{"trusted.overlay."}}
			// The merged root is the top layer directory itself, whose
			// metadata no layer without a "./" entry sets.
			om := o
			om.IgnoreRoot = true
			if err := sinktest.Compare(flat, merged, om); err != nil {
				t.Error(err)
			}
			// And Flatten onto a host directory gives the same tree too.
			hd := filepath.Join(top, "flat")
			os.Mkdir(hd, 0o755)
			for i, l := range layers {
				if err := ApplyLayer(hostdir.New(hd), bytes.NewReader(l), LayerOptions{}); err != nil {
					t.Fatalf("hostdir layer %d: %v", i+1, err)
				}
			}
			if err := sinktest.Compare(flat, hostdir.New(hd), o); err != nil {
				t.Error(err)
			}
		})
	}
}
