package reflink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"z.gfire.dev/gvx/reflink/reflinktest"
)

// The cross-checks below mount real filesystems made by their own mkfs on
// loop devices (root only) and check clones with the kernel's view of them:
// statfs free space, FIEMAP's shared flag through filefrag(8), st_blocks.

func run(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// freeBytes is the free space of the filesystem holding dir after flushing
// it, so delayed allocation and copy-on-write are accounted for.
func freeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(d.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bfree) * int64(st.Bsize)
}

func allocated(t testing.TB, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * 512
}

// sharedExtents reports whether filefrag -v flags any extent of path as
// shared, and whether every data extent is.
func sharedExtents(t testing.TB, path string) (any, all bool) {
	t.Helper()
	if _, err := exec.LookPath("filefrag"); err != nil {
		t.Skipf("filefrag not installed (Debian: e2fsprogs): %v", err)
	}
	out := run(t, "filefrag", "-v", path)
	all = true
	n := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !isExtentNo(f[0]) {
			continue
		}
		n++
		if strings.Contains(line, "shared") {
			any = true
		} else {
			all = false
		}
	}
	if n == 0 {
		t.Fatalf("filefrag -v %s: no extents in\n%s", path, out)
	}
	return any, all
}

// isExtentNo matches filefrag -v's "12:" extent column.
func isExtentNo(s string) bool {
	n, ok := strings.CutSuffix(s, ":")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

var goldenRegions = []region{{0, 4 << 20}, {20 << 20, 8 << 20}, {60 << 20, 4 << 20}}

const goldenSize = 96 << 20 // 96 MiB logical, 16 MiB of data

func TestCloneSharesExtentsOnReflinkFS(t *testing.T) {
	for _, kind := range []string{"xfs", "btrfs"} {
		t.Run(kind, func(t *testing.T) {
			mnt := reflinktest.Mount(t, kind)
			golden := filepath.Join(mnt, "golden-docker.ext4")
			want := makeSparse(t, golden, goldenSize, goldenRegions, 0o640)
			data := dataLen(goldenRegions)

			if err := Probe(mnt); err != nil {
				t.Fatalf("Probe(%s): %v", kind, err)
			}
			before := freeBytes(t, mnt)
			var eps []string
			for i := range 3 {
				ep := filepath.Join(mnt, fmt.Sprintf("ep-%04d.ext4", i))
				res, err := CloneFile(golden, ep, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Method != MethodClone || res.Copied != 0 || res.Size != goldenSize {
					t.Fatalf("result %+v, want a clone of %d bytes", res, goldenSize)
				}
				eps = append(eps, ep)
			}
			// Three 16 MiB files cost (almost) nothing: allow 1 MiB of metadata.
			if used := before - freeBytes(t, mnt); used > 1<<20 {
				t.Errorf("3 clones of %d data bytes used %d bytes of free space; extents are not shared", data, used)
			}
			for _, ep := range eps {
				mustEqualFile(t, ep, want)
				if any, all := sharedExtents(t, ep); !any || !all {
					t.Errorf("filefrag -v %s: shared extents any=%v all=%v, want all shared", ep, any, all)
				}
				if fi, _ := os.Stat(ep); fi.Mode().Perm() != 0o640 {
					t.Errorf("%s: mode %v, want 0640", ep, fi.Mode())
				}
			}
			if got, want := allocated(t, eps[0]), allocated(t, golden); got != want {
				t.Errorf("clone allocates %d bytes, golden %d", got, want)
			}

			// Copy on write: a write to one clone changes only that clone.
			f, err := os.OpenFile(eps[0], os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			edit := bytes.Repeat([]byte{0xee}, 4096)
			for _, off := range []int64{0, 21 << 20, 40 << 20} { // data, data, hole
				if _, err := f.WriteAt(edit, off); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			mustEqualFile(t, golden, want)
			mustEqualFile(t, eps[1], want)
			mustEqualFile(t, eps[2], want)
			got, _ := os.ReadFile(eps[0])
			if !bytes.Equal(got[21<<20:21<<20+4096], edit) || !bytes.Equal(got[40<<20:40<<20+4096], edit) {
				t.Error("the write to the clone is not in the clone")
			}

			// Auto clones too; Never copies and shares nothing.
			if res, err := CloneFile(golden, filepath.Join(mnt, "auto"), Options{Mode: Auto}); err != nil || res.Method != MethodClone {
				t.Errorf("Auto on %s: %+v, %v; want a clone", kind, res, err)
			}
			before = freeBytes(t, mnt)
			res, err := CloneFile(golden, filepath.Join(mnt, "never"), Options{Mode: Never})
			if err != nil || res.Method != MethodCopy || res.Copied != data {
				t.Fatalf("Never: %+v, %v; want a copy of the %d data bytes", res, err, data)
			}
			mustEqualFile(t, filepath.Join(mnt, "never"), want)
			if any, _ := sharedExtents(t, filepath.Join(mnt, "never")); any {
				t.Error("Never made a file that shares extents")
			}
			if used := before - freeBytes(t, mnt); used < data {
				t.Errorf("Never used %d bytes of free space for %d data bytes: not a real copy", used, data)
			}
			if got, want := allocated(t, filepath.Join(mnt, "never")), allocated(t, golden); got != want {
				t.Errorf("Never's copy allocates %d bytes, golden %d: holes not kept", got, want)
			}
			mustOnlyFiles(t, mnt, "auto", "ep-0000.ext4", "ep-0001.ext4", "ep-0002.ext4", "golden-docker.ext4", "never")
		})
	}
}

func TestCloneRangeOnXFS(t *testing.T) {
	mnt := reflinktest.Mount(t, "xfs")
	src := filepath.Join(mnt, "src")
	want := makeSparse(t, src, 8<<20, []region{{0, 8 << 20}}, 0o600)
	sf, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	df, err := os.Create(filepath.Join(mnt, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	// dst[1M:3M] = src[4M:6M]
	if err := CloneRange(df, sf, 1<<20, 4<<20, 2<<20); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(df.Name())
	if len(got) != 3<<20 || !bytes.Equal(got[1<<20:], want[4<<20:6<<20]) || !isZero(got[:1<<20]) {
		t.Fatalf("CloneRange: wrong contents (len %d)", len(got))
	}
	if any, _ := sharedExtents(t, df.Name()); !any {
		t.Error("CloneRange: no shared extent")
	}
	// Unaligned offsets are the caller's error, not "unsupported"... but
	// the kernel reports them as EINVAL, which FICLONE also uses for
	// "cannot"; either way it must fail, never copy.
	if err := CloneRange(df, sf, 1, 0, 4096); err == nil {
		t.Error("CloneRange with an unaligned offset succeeded")
	}
}

func TestNoCloneFS(t *testing.T) {
	for _, kind := range []string{"ext4", "tmpfs"} {
		t.Run(kind, func(t *testing.T) {
			mnt := reflinktest.Mount(t, kind)
			golden := filepath.Join(mnt, "golden-docker.ext4")
			want := makeSparse(t, golden, goldenSize, goldenRegions, 0o644)
			ep := filepath.Join(mnt, "ep-0000.ext4")

			ok, err := Supported(mnt)
			if ok || err != nil {
				t.Errorf("Supported(%s) = %v, %v; want false, nil", kind, ok, err)
			}
			_, err = CloneFile(golden, ep, Options{Mode: Always})
			var nse *NotSupportedError
			if !errors.Is(err, ErrNotSupported) || !errors.As(err, &nse) {
				t.Fatalf("Always on %s: %v; want ErrNotSupported", kind, err)
			}
			if nse.FS != kind || nse.CrossDevice || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "mode auto") {
				t.Errorf("error %q (FS %q) should name %s and say to use mode auto", err, nse.FS, kind)
			}
			mustOnlyFiles(t, mnt, "golden-docker.ext4")

			res, err := CloneFile(golden, ep, Options{Mode: Auto})
			if err != nil || res.Method != MethodCopy || res.Copied != dataLen(goldenRegions) {
				t.Fatalf("Auto on %s: %+v, %v; want a copy of the data bytes only", kind, res, err)
			}
			if res.Fallback == nil || res.Fallback.FS != kind {
				t.Errorf("Auto on %s: Fallback %v, want the reason naming %s", kind, res.Fallback, kind)
			}
			mustEqualFile(t, ep, want)
			if got, want := allocated(t, ep), allocated(t, golden); got != want {
				t.Errorf("sparse copy allocates %d bytes (st_blocks), the source %d", got, want)
			}
			if a := allocated(t, ep); a >= goldenSize/2 {
				t.Errorf("sparse copy allocates %d of %d bytes: holes were filled", a, goldenSize)
			}
			mustOnlyFiles(t, mnt, "ep-0000.ext4", "golden-docker.ext4")
		})
	}
}

func TestXFSWithoutReflink(t *testing.T) {
	mnt := reflinktest.Mount(t, "xfs-noreflink")
	golden := filepath.Join(mnt, "golden")
	makeSparse(t, golden, 1<<20, []region{{0, 1 << 20}}, 0o644)
	err := Probe(mnt)
	var nse *NotSupportedError
	if !errors.As(err, &nse) || nse.FS != "xfs" || !strings.Contains(err.Error(), "reflink=0") {
		t.Fatalf("Probe on XFS made with reflink=0: %v; want a NotSupportedError that says why", err)
	}
	if _, err := CloneFile(golden, filepath.Join(mnt, "ep"), Options{}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("CloneFile: %v, want ErrNotSupported", err)
	}
}

func TestAcrossFilesystems(t *testing.T) {
	x := reflinktest.Mount(t, "xfs")
	tm := reflinktest.Mount(t, "tmpfs")
	golden := filepath.Join(x, "golden")
	want := makeSparse(t, golden, 8<<20, []region{{1 << 20, 1 << 20}}, 0o644)
	_, err := CloneFile(golden, filepath.Join(tm, "ep"), Options{})
	var nse *NotSupportedError
	if !errors.As(err, &nse) || !nse.CrossDevice || !strings.Contains(err.Error(), "different filesystems") {
		t.Fatalf("xfs to tmpfs: %v; want a cross-device NotSupportedError", err)
	}
	res, err := CloneFile(golden, filepath.Join(tm, "ep"), Options{Mode: Auto})
	if err != nil || res.Method != MethodCopy {
		t.Fatalf("Auto across filesystems: %+v, %v", res, err)
	}
	mustEqualFile(t, filepath.Join(tm, "ep"), want)
}

// TestCopyOutOfSpace: a copy that fills the filesystem fails with
// ErrNoSpace and removes its temporary file.
func TestCopyOutOfSpace(t *testing.T) {
	mnt := reflinktest.Mount(t, "tmpfs") // 256 MiB
	golden := filepath.Join(mnt, "golden")
	f, err := os.Create(golden)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{0x5a}, 1<<20)
	for range 100 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if _, err := CloneFile(golden, filepath.Join(mnt, "ep-0"), Options{Mode: Auto}); err != nil {
		t.Fatal(err)
	}
	_, err = CloneFile(golden, filepath.Join(mnt, "ep-1"), Options{Mode: Auto})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("third 100 MiB file on a 256 MiB tmpfs: %v, want ErrNoSpace", err)
	}
	mustOnlyFiles(t, mnt, "ep-0", "golden")
}

// xfsLogWrites is the count of log writes (iclogs written) of the XFS
// mounted at mnt, from /sys/fs/xfs/DEV/stats/stats.
func xfsLogWrites(t *testing.T, mnt string) int64 {
	t.Helper()
	out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "--target", mnt).Output()
	if err != nil {
		t.Skipf("findmnt %s: %v", mnt, err)
	}
	dev := filepath.Base(strings.TrimSpace(string(out)))
	stats, err := os.ReadFile(filepath.Join("/sys/fs/xfs", dev, "stats", "stats"))
	if err != nil {
		t.Skipf("no per-filesystem XFS statistics for %s: %v", dev, err)
	}
	for _, line := range strings.Split(string(stats), "\n") {
		var writes int64
		if _, err := fmt.Sscanf(line, "log %d", &writes); err == nil {
			return writes
		}
	}
	t.Fatalf("no log line in the XFS statistics of %s:\n%s", dev, stats)
	return 0
}

// TestDurableCloneLogWrites: on XFS a durable clone writes the log, so
// that it is on disk when CloneFile returns (a clone that skipped its
// fsyncs would write none: NoSync, checked too), and writes it once: the
// clone's fsync comes after its rename, and the directory's fsync finds
// the rename already written (with the fsync before the rename it took
// two log writes, twice the latency). The XFS log worker may write the log
// by itself meanwhile, so a round that sees more is tried again; a round
// that sees fewer fails at once.
func TestDurableCloneLogWrites(t *testing.T) {
	mnt := reflinktest.Mount(t, "xfs")
	golden := filepath.Join(mnt, "golden")
	want := makeSparse(t, golden, goldenSize, goldenRegions, 0o640)
	unix.Sync() // the golden's own metadata, out of the way
	for _, o := range []struct {
		name   string
		opts   Options
		writes int64
	}{{"durable", Options{}, 1}, {"nosync", Options{NoSync: true}, 0}} {
		t.Run(o.name, func(t *testing.T) {
			var got []int64
			for round := range 5 {
				ep := filepath.Join(mnt, fmt.Sprintf("ep-%s-%d", o.name, round))
				before := xfsLogWrites(t, mnt)
				if _, err := CloneFile(golden, ep, o.opts); err != nil {
					t.Fatal(err)
				}
				n := xfsLogWrites(t, mnt) - before
				if n < o.writes {
					t.Fatalf("a %s clone wrote the log %d times, want %d", o.name, n, o.writes)
				}
				mustEqualFile(t, ep, want)
				if fi, err := os.Stat(ep); err != nil || fi.Mode().Perm() != 0o640 {
					t.Fatalf("%s: %v, %v; want mode 0640", ep, fi, err)
				}
				if n == o.writes {
					return
				}
				got = append(got, n)
			}
			t.Fatalf("a %s clone wrote the log %v times in 5 rounds, want %d", o.name, got, o.writes)
		})
	}
}
