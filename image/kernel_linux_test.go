package image

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"testing"

	"z.gfire.dev/gvx/image/imagetest"
	"z.gfire.dev/gvx/overlay"
	"z.gfire.dev/gvx/sink/hostdir"
	"z.gfire.dev/gvx/sink/sinktest"
)

// TestKernelReadsFlattened checks the fixture image, added from an OCI
// layout in both profiles, with erofs-utils' fsck.erofs and, as root, with
// the kernel: the loop-mounted EROFS, read through the host filesystem,
// equals overlay.Flatten of the layers.
func TestKernelReadsFlattened(t *testing.T) {
	fsck, err := exec.LookPath("fsck.erofs")
	if err != nil {
		t.Skip("fsck.erofs not installed (Debian package erofs-utils)")
	}
	layers := fixtureLayers(t)
	lay := t.TempDir()
	if err := imagetest.WriteLayout(lay, fixtureImage(t, amd64, layers), ""); err != nil {
		t.Fatal(err)
	}
	want := sinktest.NewMemFS()
	var rs []io.Reader
	for _, l := range layers {
		rs = append(rs, bytes.NewReader(l))
	}
	if err := overlay.Flatten(want, rs...); err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	for _, prof := range []string{"full", "runtime"} {
		t.Run(prof, func(t *testing.T) {
			res, err := Add(ctx, c, "oci:"+lay, Options{Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(fsck, "--extract", res.EROFS).CombinedOutput(); err != nil || bytes.Contains(out, []byte("<E>")) {
				t.Errorf("fsck.erofs: %v\n%s", err, out)
			}
			if os.Geteuid() != 0 {
				t.Skip("needs root to loop-mount EROFS images")
			}
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "erofs", "-o", "loop,ro,nosuid,nodev", res.EROFS, mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount: %v\n%s", err, out)
			}
			d := hostdir.New(mnt)
			t.Cleanup(func() {
				d.Close() // its cached handle would keep the mount busy
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v\n%s", mnt, err, out)
				}
			})
			o := sinktest.CompareOptions{IgnoreAtime: true, IgnoreCtime: true, IgnoreCrtime: true, IgnoreDirSize: true, IgnoreRoot: true}
			if prof == "runtime" {
				o.IgnoreXattrPrefixes = []string{""}
			}
			if err := sinktest.Compare(d, want, o); err != nil {
				t.Errorf("kernel's view of the %s image differs from overlay.Flatten: %v", prof, err)
			}
		})
	}
}
