package overlay

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/sink"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// needRootAndTool skips unless running as root with the named tool.
func needRootAndTool(t *testing.T, tool string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: devices, other owners and trusted.* xattrs on the host")
	}
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("needs %s: %v", tool, err)
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr.Bytes())
	}
	return out
}

// hostOpts is what a host directory cannot reproduce: ctime and crtime are
// set by the kernel, directory sizes are the filesystem's.
var hostOpts = sinktest.CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true}

// TestGNUTarExtractsOurExport: GNU tar unpacks our PAX archive into the very
// tree we exported, xattrs, devices, owners, ns times and hard links included.
func TestGNUTarExtractsOurExport(t *testing.T) {
	needRootAndTool(t, "tar")
	src := testTree(t, 3, sinktest.TreeOptions{})
	archive := filepath.Join(t.TempDir(), "a.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := ExportTar(f, src, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := t.TempDir()
	run(t, "tar", "--xattrs", "--xattrs-include=*", "--numeric-owner", "--same-owner", "-xpf", archive, "-C", out)
	o := hostOpts
	// GNU tar restores atime from the archive only for files; directories
	// get theirs from the clock when their children are made.
	o.IgnoreAtime = true
	if err := sinktest.Compare(src, hostdir.New(out), o); err != nil {
		t.Error(err)
	}
}

// TestImportGNUTar: what GNU tar archives from a host tree (posix format
// with xattrs and 1.0 sparse maps; gnu format with old sparse headers),
// ImportTar restores.
func TestImportGNUTar(t *testing.T) {
	needRootAndTool(t, "tar")
	src := testTree(t, 4, sinktest.TreeOptions{})
	dir := t.TempDir()
	if err := sink.Copy(hostdir.New(dir), src); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format string
		args   []string
		o      sinktest.CompareOptions
	}{
		{"posix", []string{"--format=posix", "--xattrs", "--xattrs-include=*"}, hostOpts},
		{"posix-gzip", []string{"--format=posix", "--xattrs", "--xattrs-include=*", "-z"}, hostOpts},
		// gnu format: times in whole seconds and no xattrs.
		{"gnu", []string{"--format=gnu"}, sinktest.CompareOptions{IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true,
			IgnoreMtime: true, IgnoreXattrPrefixes: []string{""}}},
	} {
		t.Run(c.format, func(t *testing.T) {
			archive := filepath.Join(t.TempDir(), "a.tar")
			args := append([]string{"--sparse", "--numeric-owner", "-cf", archive, "-C", dir}, c.args...)
			run(t, "tar", append(args, ".")...)
			m := sinktest.NewMemFS()
			f, err := os.Open(archive)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := ImportTar(m, f, ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			o := c.o
			o.IgnoreAtime = true // tar read the files
			// GNU tar archives each name of a hard-linked fifo or device as
			// a node of its own.
			o.IgnoreSpecialHardLinks = true
			if err := sinktest.Compare(hostdir.New(dir), m, o); err != nil {
				t.Error(err)
			}
			// The holes stayed holes on the way in.
			if m.DataBytes() > 64<<20 {
				t.Errorf("MemFS holds %d bytes", m.DataBytes())
			}
		})
	}
}

// TestImportGNUTarSparse uses a sparse file with data past 5 GiB: GNU tar's
// sparse map must come through without 5 GiB of zeros in the archive.
func TestImportGNUTarSparse(t *testing.T) {
	needRootAndTool(t, "tar")
	if testing.Short() {
		t.Skip("reads 5 GiB of holes")
	}
	dir := t.TempDir()
	d := hostdir.New(dir)
	if err := sinktest.EdgeTree(d, sinktest.TreeOptions{HugeSparse: true}); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "a.tar")
	run(t, "tar", "--sparse", "--format=posix", "--numeric-owner", "-cf", archive, "-C", dir, "sparse")
	if fi, err := os.Stat(archive); err != nil || fi.Size() > 16<<20 {
		t.Fatalf("archive: %v %v", fi.Size(), err)
	}
	m := sinktest.NewMemFS()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ImportTar(m, f, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	want, _ := d.Lstat("sparse/past-5GiB")
	got, err := m.Lstat("sparse/past-5GiB")
	if err != nil || got.Size != want.Size {
		t.Fatalf("size %v, want %d: %v", got, want.Size, err)
	}
	if m.DataBytes() > 1<<20 {
		t.Errorf("MemFS holds %d bytes", m.DataBytes())
	}
}

// TestGNUTarExtractsOurSparse: GNU tar restores our sparse entries, holes
// and all.
func TestGNUTarExtractsOurSparse(t *testing.T) {
	needRootAndTool(t, "tar")
	if testing.Short() {
		t.Skip("scans 5 GiB of holes")
	}
	src := sinktest.NewMemFS()
	if err := sinktest.EdgeTree(src, sinktest.TreeOptions{HugeSparse: true}); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "a.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := ExportTar(f, src, ExportOptions{SkipSockets: true}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := t.TempDir()
	run(t, "tar", "--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf", archive, "-C", out)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(out, "sparse/past-5GiB"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 5<<30+3*4096+17 || st.Blocks > 64 {
		t.Errorf("GNU tar made size %d with %d blocks", st.Size, st.Blocks)
	}
	// The data past the hole (reading all 5 GiB would only cost time).
	f, err = os.Open(filepath.Join(out, "sparse/past-5GiB"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off = 5<<30 + 4096 - 1 // one zero byte, then the data
	got := make([]byte, st.Size-off)
	n, _ := f.ReadAt(got, off)
	want := make([]byte, len(got))
	r, _ := src.Open("sparse/past-5GiB")
	defer r.Close()
	io.CopyN(io.Discard, r, off)
	io.ReadFull(r, want)
	if n != len(want) || !bytes.Equal(got[:n], want) {
		t.Errorf("data past the hole differs (%d bytes read)", n)
	}
}

// TestTarRoundTripHostDir: our export imported by us into a host directory
// is the source tree, as the kernel stores it.
func TestTarRoundTripHostDir(t *testing.T) {
	needRootAndTool(t, "true")
	src := testTree(t, 5, sinktest.TreeOptions{})
	var buf bytes.Buffer
	if err := ExportTar(&buf, src, ExportOptions{Compression: Zstd}); err != nil {
		t.Fatal(err)
	}
	d := hostdir.New(t.TempDir())
	defer d.Close()
	if err := ImportTar(d, &buf, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sinktest.Compare(src, d, hostOpts); err != nil {
		t.Error(err)
	}
}

// TestHostileTarIntoHostDir: on a real filesystem, nothing a hostile
// archive does lands outside the target.
func TestHostileTarIntoHostDir(t *testing.T) {
	outside := t.TempDir()
	canary := filepath.Join(outside, "canary")
	if err := os.WriteFile(canary, []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"symlink-abs":      tarOf(t, symlink("l", outside), file("l/canary", "pwned")),
		"symlink-rel":      tarOf(t, dir("d"), symlink("d/up", "../../../../../../../.."+outside), file("d/up/canary", "pwned")),
		"symlink-chain":    tarOf(t, symlink("a", "b"), symlink("b", outside), file("a/canary", "pwned")),
		"symlink-dir-swap": tarOf(t, dir("x"), symlink("x", outside), file("x/canary", "pwned")),
		"dotdot":           tarOf(t, file("../../../../../../.."+canary, "pwned")),
		"hardlink-out":     tarOf(t, hardlink("h", canary)),
		"hardlink-dotdot":  tarOf(t, hardlink("h", "../../../../../../.."+canary)),
		"whiteout-out":     tarOf(t, symlink("l", outside), wh("l/.wh.canary")),
		"opaque-out":       tarOf(t, symlink("l", outside), wh("l/.wh..wh..opq")),
	} {
		for _, mode := range []string{"import", "layer", "overlayfs"} {
			d := hostdir.New(t.TempDir())
			var err error
			switch mode {
			case "import":
				err = ImportTar(d, bytes.NewReader(data), ImportOptions{})
			case "layer":
				err = ApplyLayer(d, bytes.NewReader(data), LayerOptions{})
			case "overlayfs":
				err = WriteLayerOverlayFS(d, bytes.NewReader(data), LayerOptions{})
			}
			d.Close()
			b, rerr := os.ReadFile(canary)
			if rerr != nil || string(b) != "safe" {
				t.Fatalf("%s/%s: the canary outside the target changed: %q %v (import error: %v)", name, mode, b, rerr, err)
			}
			if names, _ := os.ReadDir(outside); len(names) != 1 {
				t.Fatalf("%s/%s: wrote outside the target: %v", name, mode, names)
			}
			if !errors.Is(err, sink.ErrSymlinkInPath) && !errors.Is(err, ErrUnsafePath) && !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s/%s: %v, want a refusal", name, mode, err)
			}
		}
	}
}
