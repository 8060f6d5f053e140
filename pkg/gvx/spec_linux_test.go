package gvx_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"z.gfire.dev/gvx/ext4lite"
	"z.gfire.dev/gvx/pkg/gvx"
)

// TestMountPathWithCommaAndEquals: a volume whose host path and guest path
// both hold "," and "=" (which a --mount flag would split on) is mounted,
// written by one episode and read back by the next, and the host sees the
// file in the volume: the SDK hands rungv the spec itself, over a pipe.
func TestMountPathWithCommaAndEquals(t *testing.T) {
	need(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "runs,a=b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(dir, "ep,1=x.ext4")
	v, err := ext4lite.Create(vol, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	guest := "/data,k=v"
	run := func(cmd string, ro bool) string {
		t.Helper()
		var out, errb bytes.Buffer
		sb := newSandbox(t, ctx, gvx.Config{
			Cmd:    []string{"sh", "-c", cmd},
			Mounts: []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: vol, GuestPath: guest, ReadOnly: ro}},
			Stdout: &out, Stderr: &errb,
		})
		if s := sb.Spec(); s.Mounts[0].Source != vol || s.Mounts[0].Target != guest {
			t.Fatalf("spec mounts %+v", s.Mounts)
		}
		code, err := sb.Run(ctx)
		if err != nil || code != 0 {
			t.Fatalf("%q: exit %d, %v; stderr %q", cmd, code, err, errb.String())
		}
		return out.String()
	}
	run(`echo "written at $0" > "/data,k=v/f,1=2"`, false)
	if got := run(`cat "/data,k=v/f,1=2"; grep -c "data,k=v" /proc/mounts`, true); got != "written at sh\n1\n" {
		t.Fatalf("read back %q", got)
	}
	v, err = ext4lite.Open(vol, &ext4lite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	f, err := v.Open("f,1=2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	if string(b) != "written at sh\n" {
		t.Errorf("the host reads %q from the volume", b)
	}
}
