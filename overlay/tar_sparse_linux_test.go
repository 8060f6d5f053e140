package overlay

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"z.gfire.dev/gvx/erofs"
)

// TestImportSparseGNUTar imports what GNU tar writes for a 1 TiB file with
// 1 MiB of data in each of its sparse formats (old GNU 'S' headers with
// extension blocks, PAX 0.0, 0.1 and 1.0) into ext4lite, the EROFS builder
// and MemFS: each reads only the data, and the EROFS image written from it
// is a sparse file of about the data's size that the reader reads back.
func TestImportSparseGNUTar(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("needs GNU tar")
	}
	if out, _ := exec.Command("tar", "--version").Output(); !bytes.Contains(out, []byte("GNU tar")) {
		t.Skip("needs GNU tar")
	}
	f := newSparseFixture()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(filepath.Join(src, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(f.size); err != nil {
		t.Skipf("the temporary directory cannot hold a 1 TiB sparse file: %v", err)
	}
	for i, rg := range f.regs {
		if _, err := fh.WriteAt(f.data[i], rg.Off); err != nil {
			t.Fatal(err)
		}
	}
	fh.Close()
	for _, tc := range []struct{ name, format, version string }{
		{"gnu", "gnu", ""}, {"pax0.0", "posix", "0.0"}, {"pax0.1", "posix", "0.1"}, {"pax1.0", "posix", "1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tarFile := filepath.Join(dir, tc.name+".tar")
			args := []string{"-c", "-S", "--format=" + tc.format, "-f", tarFile, "-C", src, "big"}
			if tc.version != "" {
				args = append(args[:2], append([]string{"--sparse-version=" + tc.version}, args[2:]...)...)
			}
			if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
				t.Fatalf("tar %v: %v\n%s", args, err, out)
			}
			archive, err := os.ReadFile(tarFile)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(archive)) > f.dataSize()+1<<20 {
				t.Fatalf("GNU tar wrote %d bytes: not a sparse archive", len(archive))
			}
			srcs := importSparse(t, archive, "big", f)
			b := srcs["erofs"].(*erofs.Builder)
			img := filepath.Join(t.TempDir(), "img.erofs")
			out, err := os.Create(img)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.WriteTo(out); err != nil {
				t.Fatal(err)
			}
			out.Close()
			var st syscall.Stat_t
			if err := syscall.Stat(img, &st); err != nil {
				t.Fatal(err)
			}
			if st.Size < f.size || st.Blocks*512 > 4*f.dataSize()+1<<20 {
				t.Errorf("EROFS image: %d bytes apparent, %d allocated; want ≥ %d apparent and about %d allocated", st.Size, st.Blocks*512, f.size, f.dataSize())
			}
			rf, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer rf.Close()
			im, err := erofs.Open(rf, st.Size)
			if err != nil {
				t.Fatal(err)
			}
			f.verify(t, im, "big")
		})
	}
}
