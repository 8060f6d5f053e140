package image

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"z.gfire.dev/gvx/image/imagetest"
)

// TestBusyboxBoots adds imagetest's busybox layout and, as root, mounts
// the runtime-profile EROFS with the kernel and runs a shell in it with
// chroot: the cache produces a bootable root filesystem.
func TestBusyboxBoots(t *testing.T) {
	lay := t.TempDir()
	if err := imagetest.BuildBusyboxLayout(lay); errors.Is(err, imagetest.ErrNoBusybox) {
		t.Skip("no /bin/busybox (Debian package busybox-static)")
	} else if err != nil {
		t.Fatal(err)
	}
	c := newCache(t)
	res, err := Add(ctx, c, "oci:"+lay+":"+imagetest.BusyboxRef, Options{})
	if err != nil {
		t.Fatal(err)
	}
	im := openEROFS(t, res.EROFS)
	if h, err := im.Lstat("bin/sh"); err != nil || h.Linkname != "busybox" {
		t.Fatalf("bin/sh: %+v %v", h, err)
	}
	cfg, err := ReadConfig(res.Config)
	if err != nil || len(cfg.Cmd) != 1 || cfg.Cmd[0] != "/bin/sh" {
		t.Errorf("config %+v %v", cfg, err)
	}
	if fsck, err := exec.LookPath("fsck.erofs"); err == nil {
		if out, err := exec.Command(fsck, res.EROFS).CombinedOutput(); err != nil || bytes.Contains(out, []byte("<E>")) {
			t.Errorf("fsck.erofs: %v\n%s", err, out)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to loop-mount the image and chroot into it")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "erofs", "-o", "loop,ro,nosuid,nodev", res.EROFS, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	cmd := exec.Command("chroot", mnt, "/bin/sh", "-c", "echo hi; cat /etc/hostname")
	cmd.Env = cfg.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s /bin/sh: %v\n%s", mnt, err, out)
	}
	if string(out) != "hi\ngvx\n" {
		t.Errorf("shell in the image printed %q, want \"hi\\ngvx\\n\"", out)
	}
}
